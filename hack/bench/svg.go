package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The plot is hand-written SVG: the main module takes no plotting
// dependency for one figure.

// plotColors are fixed per contender, so that plots of two runs compare.
var plotColors = map[string]string{
	contenderHandroll:  "#1f77b4",
	contenderTwin:      "#d62728",
	contenderTwinTuned: "#ff7f0e",
	contenderFloor:     "#555555",
}

// Layout, in SVG user units.
const (
	svgWidth, svgHeight = 960, 430
	plotTop, plotHeight = 70, 260
	plotWidth           = 360
	legendY             = 405
)

var panelLeft = [2]float64{80, 570}

// series is one contender's line in one panel.
type series struct {
	contender string
	points    [][2]float64 // N, value
}

// scaleSVG draws converge time and peak RSS against N in the plot regime;
// false when there is nothing to draw.
func (r *Results) scaleSVG() (string, bool) {
	g, ok := r.plotRegime()
	if !ok {
		return "", false
	}
	var sizes []int
	for _, c := range r.cells() {
		if c.Regime == g {
			sizes = append(sizes, c.N)
		}
	}
	slices.Sort(sizes)
	panels, contenders := r.scalePanels(g, sizes)
	if len(contenders) == 0 {
		return "", false
	}

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	logX := sizes[len(sizes)-1] >= 4*sizes[0]
	x := xScale(sizes, logX)
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, svgHeight, svgWidth, svgHeight)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" text-anchor="middle" font-size="15">%s</text>`+"\n", svgWidth/2,
		xmlEscape(fmt.Sprintf("How cost grows with N: %s, %d workers; %s", g.Title(), r.Config.Workers, r.samplesNote())))
	xLabel := "WebApps (N)"
	if logX {
		xLabel += ", logarithmic"
	}
	for i, panel := range panels {
		drawPanel(p, panelLeft[i], panel, sizes, x, xLabel)
	}
	drawLegend(p, contenders)
	p("</svg>\n")
	return b.String(), true
}

// scalePanel is one panel of the plot: a figure of the converge samples,
// one series per contender.
type scalePanel struct {
	title, unit, axis string
	f                 func(ConvergeSample) float64
	series            []series
}

// scalePanels are the plot's two panels at regime g over sizes, and the
// contenders with a point in either, in the columns' order.
func (r *Results) scalePanels(g Regime, sizes []int) ([2]scalePanel, []string) {
	panels := [2]scalePanel{
		{title: "Applied: first create → all applied", unit: "s", axis: "seconds", f: ConvergeSample.applied},
		{title: "Peak RSS (VmHWM) once converged", unit: "MiB", axis: "MiB", f: func(s ConvergeSample) float64 { return mib(s.ConvergedPeakRSSBytes) }},
	}
	var contenders []string
	for i := range panels {
		for _, col := range columns {
			s := series{contender: col.contender}
			for _, n := range sizes {
				v := median(figures(convergeValues(r, Cell{N: n, Regime: g}, false, always(panels[i].f))(col.contender)))
				if !math.IsNaN(v) {
					s.points = append(s.points, [2]float64{float64(n), v})
				}
			}
			if len(s.points) > 0 {
				panels[i].series = append(panels[i].series, s)
				if !slices.Contains(contenders, col.contender) {
					contenders = append(contenders, col.contender)
				}
			}
		}
	}
	return panels, contenders
}

// drawPanel draws panel with its left edge at left: grid, axes, and a line
// per contender with a marker per size.
func drawPanel(p func(string, ...any), left float64, panel scalePanel, sizes []int, x func(float64) float64, xLabel string) {
	top, bottom := float64(plotTop), float64(plotTop+plotHeight)
	var hi float64
	for _, s := range panel.series {
		for _, pt := range s.points {
			hi = max(hi, pt[1])
		}
	}
	step, yTop := niceAxis(hi)
	y := func(v float64) float64 { return bottom - v/yTop*plotHeight }
	p(`<text x="%.1f" y="%d" text-anchor="middle" font-size="13">%s</text>`+"\n", left+plotWidth/2, plotTop-14, xmlEscape(panel.title))
	// Grid and axes.
	for v := 0.0; v <= yTop+step/2; v += step {
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), left+plotWidth, y(v))
		p(`<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, y(v), tickLabel(v, step))
	}
	for _, n := range sizes {
		xv := left + x(float64(n))*plotWidth
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", xv, top, xv, bottom)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", xv, bottom+16, n)
	}
	p(`<rect x="%.1f" y="%.1f" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, plotWidth, plotHeight)
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+plotWidth/2, bottom+36, xmlEscape(xLabel))
	p(`<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		left-48, top+plotHeight/2, left-48, top+plotHeight/2, xmlEscape(panel.axis))
	// One line per contender, a marker per size.
	for _, s := range panel.series {
		color := plotColors[s.contender]
		var pts []string
		for _, pt := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", left+x(pt[0])*plotWidth, y(pt[1])))
		}
		dash := ""
		if s.contender == contenderFloor {
			dash = ` stroke-dasharray="6 4"`
		}
		if len(pts) > 1 {
			p(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n", color, dash, strings.Join(pts, " "), xmlEscape(s.contender))
		}
		for j, pt := range s.points {
			xy := strings.Split(pts[j], ",")
			p(`<circle cx="%s" cy="%s" r="3.5" fill="%s"><title>%s</title></circle>`+"\n", xy[0], xy[1], color,
				xmlEscape(fmt.Sprintf("%s, N = %d: %s %s", s.contender, int(pt[0]), strconv.FormatFloat(pt[1], 'f', 1, 64), panel.unit)))
		}
	}
}

// drawLegend draws the legend, centred under both panels.
func drawLegend(p func(string, ...any), contenders []string) {
	const itemWidth = 130
	lx := float64(svgWidth)/2 - float64(len(contenders)*itemWidth)/2
	for i, c := range contenders {
		ix := lx + float64(i*itemWidth)
		dash := ""
		if c == contenderFloor {
			dash = ` stroke-dasharray="6 4"`
		}
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", ix, legendY, ix+24, legendY, plotColors[c], dash)
		p(`<circle cx="%.1f" cy="%d" r="3.5" fill="%s"/>`+"\n", ix+12, legendY, plotColors[c])
		p(`<text x="%.1f" y="%d" dominant-baseline="middle">%s</text>`+"\n", ix+30, legendY, xmlEscape(c))
	}
}

// xScale maps a size to [0, 1] across the panel, with a margin so that
// no marker sits on the frame.
func xScale(sizes []int, logX bool) func(float64) float64 {
	lo, hi := float64(sizes[0]), float64(sizes[len(sizes)-1])
	f := func(v float64) float64 { return v }
	if logX {
		f = math.Log10
	} else {
		lo = 0
	}
	a, z := f(lo), f(hi)
	pad := (z - a) * 0.08
	if z == a {
		pad = 1
	}
	a, z = a-pad, z+pad
	return func(v float64) float64 { return (f(v) - a) / (z - a) }
}

// niceAxis returns a tick step of 1, 2 or 5 × 10^k and the axis top, a
// multiple of it at or above hi.
func niceAxis(hi float64) (step, top float64) {
	if hi <= 0 || math.IsNaN(hi) {
		return 1, 1
	}
	raw := hi / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return step, math.Ceil(hi/step-1e-9) * step
}

// tickLabel prints v with as many decimals as step needs.
func tickLabel(v, step float64) string {
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }
