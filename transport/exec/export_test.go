package exec

// ParseHint is parseHint for the external tests.
var ParseHint = parseHint
