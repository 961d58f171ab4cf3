// Package scheme builds the one runtime.Scheme handroll uses.
//
// Manager piece replaced: Options.Scheme and the clientgoscheme.AddToScheme
// call in every controller-runtime main. A Manager given an empty scheme
// fails at run time with "no kind is registered"; here the scheme is built
// once, explicitly, from a list a reader can see, and KindFor turns that
// failure into an error that says what to add.
package scheme
