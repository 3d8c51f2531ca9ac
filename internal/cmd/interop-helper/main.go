// Command interop-helper exposes relayload's protocol code to the interop
// suite (interop/, pytest against Sentry's own Python packages) as a real
// process: one subcommand per operation, input from flags and files, result on
// stdout.
//
// Exit codes: 0 success; 1 the input was checked and rejected (stdout names
// the error class: malformed, bad_signature, expired); 2 usage or I/O error
// (one line on stderr).
//
// To add subcommands, write func(args []string, stdout io.Writer) error in a
// new file of this package and add it to commands below.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command runs one subcommand. A returned rejectedError exits 1, any other
// error exits 2.
type command func(args []string, stdout io.Writer) error

// commands returns the subcommands by name.
func commands() map[string]command {
	return map[string]command{
		// relayauth (auth.go)
		"keygen":           keygen,
		"sign":             sign,
		"verify":           verify,
		"mint-token":       mintToken,
		"validate-token":   validateToken,
		"parse-keys":       parseKeys,
		"load-credentials": loadCredentials,
		// pool and envelope (pool.go)
		"dump-pool":      dumpPool,
		"parse-envelope": parseEnvelope,
	}
}

// rejectedError reports input that was checked and found invalid (exit 1).
type rejectedError struct{ err error }

func (e rejectedError) Error() string { return e.err.Error() }
func (e rejectedError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	commands := commands()
	if len(args) == 0 || commands[args[0]] == nil {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(stderr, "usage: interop-helper <%s> [flags]\n", strings.Join(names, "|"))
		return 2
	}
	err := commands[args[0]](args[1:], stdout)
	var rej rejectedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &rej):
		return 1
	default:
		fmt.Fprintf(stderr, "interop-helper %s: %v\n", args[0], err)
		return 2
	}
}
