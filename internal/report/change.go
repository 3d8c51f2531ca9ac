package report

// Pct1 is a change in percent with one decimal and its sign ("+4.1%",
// "−12.3%", "±0.0%"), as the report writes a paired change and its bounds.
func Pct1(v float64) string { return pct1(v) }
