// Package archdoc holds the test that keeps docs/architecture.md true: its
// table of public packages must name exactly what those packages export.
// It has no code of its own.
package archdoc
