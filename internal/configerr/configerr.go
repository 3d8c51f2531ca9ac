// Package configerr is the error type of a bad configuration value, shared
// by the library packages (blast, orchestrate) so that a program maps it
// to its own words: a library names the Config field (and any other
// fields involved), a command line turns those into flag names. Library
// code never speaks the command line's language.
package configerr

import (
	"errors"
	"fmt"
	"strings"
)

// ErrConfig is matched (errors.Is) by every *Error.
var ErrConfig = errors.New("bad config")

// Error is a bad value of Field. Msg may name other fields with %s, one per
// entry of Related, so that they are rendered in the reader's words too.
type Error struct {
	Field   string
	Msg     string
	Related []string
	// Err is the underlying cause, if any.
	Err error
}

// New is an error about field; msg is a fmt format whose %s verbs name
// the related fields, in order.
func New(field, msg string, related ...string) *Error {
	return &Error{Field: field, Msg: msg, Related: related}
}

// Errorf is an error about field with a formatted message (no related
// fields).
func Errorf(field, format string, a ...any) *Error {
	return &Error{Field: field, Msg: strings.ReplaceAll(fmt.Sprintf(format, a...), "%", "%%")}
}

// Wrap is an error about field caused by err.
func Wrap(field string, err error) *Error {
	return &Error{Field: field, Msg: strings.ReplaceAll(err.Error(), "%", "%%"), Err: err}
}

// Error names fields as they are in the Config.
func (e *Error) Error() string { return e.Render(func(f string) string { return f }) }

// Render writes the error with name(field) for every field, e.g. flag
// names: "--find-max: wants two rates".
func (e *Error) Render(name func(field string) string) string {
	args := make([]any, len(e.Related))
	for i, r := range e.Related {
		args[i] = name(r)
	}
	msg := fmt.Sprintf(e.Msg, args...)
	if e.Field == "" {
		return msg
	}
	return name(e.Field) + ": " + msg
}

// Unwrap lets errors.Is match ErrConfig and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrConfig, e.Err}
	}
	return []error{ErrConfig}
}
