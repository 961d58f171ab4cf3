package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// SumsFile is the checksum file's name in the release directory.
const SumsFile = "SHA256SUMS"

// Sums is `sha256sum *` of dir's files but SumsFile itself, sorted by name,
// as `sha256sum -c SHA256SUMS` reads it. A directory or any other kind of
// entry is refused: a release is a flat set of files.
func Sums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range entries {
		name := e.Name()
		if name == SumsFile || strings.HasSuffix(name, ".tmp") {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file; a release directory holds files only", filepath.Join(dir, name))
		}
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		lines = append(lines, sum+"  "+name+"\n")
	}
	return []byte(strings.Join(lines, "")), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
