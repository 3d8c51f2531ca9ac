package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/relayload/relayload/relayauth"
)

// errorClass names the relayauth sentinel err wraps.
func errorClass(err error) string {
	switch {
	case errors.Is(err, relayauth.ErrMalformed):
		return "malformed"
	case errors.Is(err, relayauth.ErrBadSignature):
		return "bad_signature"
	case errors.Is(err, relayauth.ErrExpired):
		return "expired"
	default:
		return "error"
	}
}

// reject prints the class and detail of a relayauth error and exits 1.
func reject(stdout io.Writer, err error) error {
	fmt.Fprintf(stdout, "%s: %v\n", errorClass(err), err)
	return rejectedError{err}
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args and refuses positional leftovers.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// readData reads a file, or stdin for "-".
func readData(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("--data-file is required")
	}
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// parseTime accepts RFC 3339 or unix seconds; empty means now.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var secs int64
	if _, err := fmt.Sscanf(s, "%d", &secs); err == nil && fmt.Sprint(secs) == s {
		return time.Unix(secs, 0), nil
	}
	return time.Time{}, fmt.Errorf("--time %q is neither RFC 3339 nor unix seconds", s)
}

// keygen prints fresh credentials as credentials.json would hold them; with
// --out it also writes that file (mode 0600).
func keygen(args []string, stdout io.Writer) error {
	fs := newFlags("keygen")
	out := fs.String("out", "", "also write credentials.json here")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := c.Save(*out); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// sign prints the X-Sentry-Relay-Signature for the data file.
func sign(args []string, stdout io.Writer) error {
	fs := newFlags("sign")
	secret := fs.String("secret", "", "secret key (43 or 86 chars)")
	dataFile := fs.String("data-file", "", "file with the data to sign (- for stdin)")
	at := fs.String("time", "", "signature time, RFC 3339 or unix seconds (default now)")
	header := fs.String("header", "", "raw header JSON instead of {\"t\":...}")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sk, err := relayauth.ParseSecretKey(*secret)
	if err != nil {
		return err
	}
	data, err := readData(*dataFile)
	if err != nil {
		return err
	}
	if *header != "" {
		fmt.Fprintln(stdout, sk.SignWithHeader(data, []byte(*header)))
		return nil
	}
	now, err := parseTime(*at)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, sk.Sign(data, now))
	return nil
}

// verify checks a signature; exit 0 and "ok", or exit 1 and the error class.
func verify(args []string, stdout io.Writer) error {
	fs := newFlags("verify")
	public := fs.String("public", "", "public key (43 chars)")
	dataFile := fs.String("data-file", "", "file with the signed data (- for stdin)")
	sig := fs.String("sig", "", "X-Sentry-Relay-Signature value")
	maxAge := fs.Duration("max-age", 0, "maximum signature age (0 = no age check)")
	at := fs.String("time", "", "verification time (default now)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pk, err := relayauth.ParsePublicKey(*public)
	if err != nil {
		return reject(stdout, err)
	}
	data, err := readData(*dataFile)
	if err != nil {
		return err
	}
	now, err := parseTime(*at)
	if err != nil {
		return err
	}
	if err := pk.Verify(data, *sig, *maxAge, now); err != nil {
		return reject(stdout, err)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// mintToken prints a registration token as Sentry's challenge step mints it.
func mintToken(args []string, stdout io.Writer) error {
	fs := newFlags("mint-token")
	secret := fs.String("secret", "", "upstream HMAC secret")
	relayID := fs.String("relay-id", "", "relay id (UUID)")
	public := fs.String("public", "", "relay public key")
	at := fs.String("time", "", "token time, RFC 3339 or unix seconds (default now)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pk, err := relayauth.ParsePublicKey(*public)
	if err != nil {
		return err
	}
	now, err := parseTime(*at)
	if err != nil {
		return err
	}
	tok, err := relayauth.MintToken([]byte(*secret), *relayID, pk, now, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// validateToken prints the token state as JSON (exit 0) or the error class (exit 1).
func validateToken(args []string, stdout io.Writer) error {
	fs := newFlags("validate-token")
	secret := fs.String("secret", "", "upstream HMAC secret")
	token := fs.String("token", "", "token")
	maxAge := fs.Duration("max-age", 0, "maximum token age (0 = no age check)")
	at := fs.String("time", "", "validation time (default now)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	now, err := parseTime(*at)
	if err != nil {
		return err
	}
	st, err := relayauth.ValidateToken([]byte(*secret), *token, *maxAge, now)
	if err != nil {
		return reject(stdout, err)
	}
	return json.NewEncoder(stdout).Encode(st)
}

// parseKeys reads one key per stdin line and prints "ok <canonical>" or the
// error class for each; it always exits 0 (the answers are the output).
func parseKeys(args []string, stdout io.Writer) error {
	fs := newFlags("parse-keys")
	kind := fs.String("kind", "public", "public or secret")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var parse func(string) (fmt.Stringer, error)
	switch *kind {
	case "public":
		parse = func(s string) (fmt.Stringer, error) { return relayauth.ParsePublicKey(s) }
	case "secret":
		parse = func(s string) (fmt.Stringer, error) { return relayauth.ParseSecretKey(s) }
	default:
		return fmt.Errorf("--kind %q: want public or secret", *kind)
	}
	sc := bufio.NewScanner(os.Stdin)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	for sc.Scan() {
		k, err := parse(sc.Text())
		if err != nil {
			fmt.Fprintln(w, errorClass(err))
			continue
		}
		fmt.Fprintln(w, "ok", k)
	}
	return sc.Err()
}

// loadCredentials validates a credentials file and prints it back.
func loadCredentials(args []string, stdout io.Writer) error {
	fs := newFlags("load-credentials")
	file := fs.String("file", "", "credentials.json path")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := relayauth.LoadCredentials(*file)
	if err != nil {
		if errors.Is(err, relayauth.ErrMalformed) {
			return reject(stdout, err)
		}
		return err
	}
	return json.NewEncoder(stdout).Encode(c)
}
