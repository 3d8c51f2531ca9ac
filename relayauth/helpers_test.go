package relayauth

import "errors"

// isErr reports whether err matches target and carries detail beyond it.
func isErr(err, target error) bool {
	return err != nil && errors.Is(err, target) && err.Error() != target.Error()
}
