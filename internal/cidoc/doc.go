// Package cidoc holds the tests that keep docs/ci.md's recipe working: the
// GitHub Actions workflow in docs/ci/relay-compare.yml must pass actionlint,
// run orchestrate with flags orchestrate has, turn its exit status into the
// check's result, and appear in docs/ci.md as it is in the file. It has no
// code of its own.
package cidoc
