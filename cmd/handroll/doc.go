// Command handroll is the WebApp operator.
//
// Manager piece replaced: ctrl.NewManager and mgr.Start. Where a
// controller-runtime main hands its options to the Manager and calls Start,
// this main reads its flags and then performs the start sequence itself, one
// numbered step at a time, each step naming the Manager option it replaces.
package main
