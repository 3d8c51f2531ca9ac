package pool

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Kind is one of the five envelope kinds the pool builds.
type Kind string

// The five kinds, named as on blast's --mix flag.
const (
	KindError       Kind = "errors"
	KindTransaction Kind = "transactions"
	KindSession     Kind = "sessions"
	KindCheckIn     Kind = "checkins"
	KindLog         Kind = "logs"
)

// Kinds returns the five kinds in a fixed order.
func Kinds() []Kind { return []Kind{KindError, KindTransaction, KindSession, KindCheckIn, KindLog} }

func (k Kind) valid() bool {
	switch k {
	case KindError, KindTransaction, KindSession, KindCheckIn, KindLog:
		return true
	}
	return false
}

// Mix weighs kinds; weights need not sum to 1. Kinds absent or weighted 0 are
// never built.
type Mix map[Kind]float64

// DefaultMix is the mix used when Options.Mix is nil.
const DefaultMix = "errors=3,transactions=2,sessions=2,checkins=1,logs=2"

// ParseMix parses "errors=3,transactions=2,…". Each kind may appear once;
// weights must be finite and ≥ 0 and at least one must be positive.
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("pool: empty mix (want e.g. %q)", DefaultMix)
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("pool: mix entry %q: want kind=weight", part)
		}
		k := Kind(strings.TrimSpace(name))
		if !k.valid() {
			return nil, fmt.Errorf("pool: mix entry %q: unknown kind %q (want one of %v)", part, k, Kinds())
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("pool: mix entry %q: kind %q given twice", part, k)
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("pool: mix entry %q: weight: %w", part, err)
		}
		m[k] = w
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks that every kind is known, every weight finite and ≥ 0 and
// the sum positive.
func (m Mix) Validate() error {
	var sum float64
	for k, w := range m {
		if !k.valid() {
			return fmt.Errorf("pool: mix: unknown kind %q", k)
		}
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return fmt.Errorf("pool: mix: kind %q: weight %v must be a finite number ≥ 0", k, w)
		}
		sum += w
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return fmt.Errorf("pool: mix: weights must sum to a finite positive number (got %v)", sum)
	}
	return nil
}

// String formats the mix in ParseMix syntax, kinds in fixed order.
func (m Mix) String() string {
	var parts []string
	for _, k := range Kinds() {
		if w, ok := m[k]; ok {
			parts = append(parts, string(k)+"="+strconv.FormatFloat(w, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// Fractions returns each kind's share of the pool (summing to 1).
func (m Mix) Fractions() map[Kind]float64 {
	var sum float64
	for _, w := range m {
		sum += w
	}
	out := make(map[Kind]float64, len(m))
	for k, w := range m {
		out[k] = w / sum
	}
	return out
}

// picker draws kinds by weight from a uniform float in [0,1).
//
// Check-ins come in pairs (in_progress, then ok/error in the next slot), so a
// drawn check-in fills two slots. Its draw weight is lowered so that the
// share of slots still matches the mix: with slot share q, the per-draw
// probability p must satisfy 2p/(1+p) = q, i.e. p = q/(2-q).
type picker struct {
	kinds []Kind
	cum   []float64
}

func newPicker(m Mix) picker {
	frac := m.Fractions()
	ks := make([]Kind, 0, len(frac))
	for _, k := range Kinds() {
		if frac[k] > 0 {
			ks = append(ks, k)
		}
	}
	q := frac[KindCheckIn]
	pc := 0.0
	if q > 0 {
		pc = q / (2 - q)
		if q >= 1 {
			pc = 1
		}
	}
	var rest float64
	for _, k := range ks {
		if k != KindCheckIn {
			rest += frac[k]
		}
	}
	p := picker{kinds: ks}
	var c float64
	for _, k := range ks {
		if k == KindCheckIn {
			c += pc
		} else {
			c += frac[k] / rest * (1 - pc)
		}
		p.cum = append(p.cum, c)
	}
	p.cum[len(p.cum)-1] = 1
	return p
}

func (p picker) pick(u float64) Kind {
	i := sort.SearchFloat64s(p.cum, u)
	if i < len(p.cum) && p.cum[i] == u {
		i++
	}
	if i >= len(p.kinds) {
		i = len(p.kinds) - 1
	}
	return p.kinds[i]
}

// pickNot draws like pick but never returns skip (falls back to the first
// other kind). Used for the last slot, where a check-in pair does not fit.
func (p picker) pickNot(u float64, skip Kind) (Kind, bool) {
	var total float64
	prev := 0.0
	for i, k := range p.kinds {
		if k != skip {
			total += p.cum[i] - prev
		}
		prev = p.cum[i]
	}
	if total <= 0 {
		return "", false
	}
	target := u * total
	prev = 0
	var acc float64
	var last Kind
	for i, k := range p.kinds {
		w := p.cum[i] - prev
		prev = p.cum[i]
		if k == skip {
			continue
		}
		acc += w
		last = k
		if target < acc {
			return k, true
		}
	}
	return last, true
}
