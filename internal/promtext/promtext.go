// Package promtext writes the numbers of a struct in the Prometheus text
// exposition format (version 0.0.4), named and labelled by the struct's
// tags, so that a type that marshals to JSON can give its Prometheus form
// without a second list of its fields that could fall behind.
//
// prom:"NAME[,gauge][,LABEL=VALUE]" on a number makes it a sample of family
// NAME (a counter unless gauge); prom:"NAME,LABEL…" on a map labels its
// keys, one LABEL a level (with no NAME its values are structs whose fields
// name the families); promlabel:"LABEL" on a field of a struct labels the
// samples of the others; help:"…" is the family's HELP text. Untagged
// structs, pointers and slices are walked into; other untagged fields and
// prom:"-" are left out.
package promtext

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Append appends the samples of v (a struct or a pointer to one) to b, each
// family's name prefixed with prefix and written in one piece with its
// HELP and TYPE lines, in the order the families first appear in v.
func Append(b []byte, prefix string, v any) []byte {
	p := writer{prefix: prefix}
	p.walk(reflect.ValueOf(v), nil)
	for _, f := range p.families {
		b = append(b, "# HELP "+prefix+f.name+" "+f.help+"\n# TYPE "+prefix+f.name+" "+f.typ+"\n"...)
		b = append(b, f.samples...)
	}
	return b
}

type family struct {
	prefix, name, help, typ string
	samples                 []byte
}

// writer gathers the samples of each family, which v may hold in
// several places, so that each family is written in one piece.
type writer struct {
	prefix   string
	families []*family
}

// walk adds the samples of the fields of v, labelled with labels (name,
// value pairs).
func (p *writer) walk(v reflect.Value, labels []string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			p.walk(v.Elem(), labels)
		}
	case reflect.Slice:
		for i := range v.Len() {
			p.walk(v.Index(i), labels)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if l := t.Field(i).Tag.Get("promlabel"); l != "" {
				labels = withLabel(labels, l, fmt.Sprint(v.Field(i)))
			}
		}
		for i := range t.NumField() {
			if tag, ok := t.Field(i).Tag.Lookup("prom"); ok && tag != "-" {
				p.field(v.Field(i), tag, t.Field(i).Tag.Get("help"), labels)
			} else if !ok && t.Field(i).IsExported() {
				p.walk(v.Field(i), labels)
			}
		}
	}
}

// field adds the samples of a field tagged prom:"tag".
func (p *writer) field(v reflect.Value, tag, help string, labels []string) {
	name, opts, _ := strings.Cut(tag, ",")
	f := &family{prefix: p.prefix, name: name, help: help, typ: "counter"}
	var keyLabels []string
	for _, o := range strings.Split(opts, ",") {
		if k, val, fixed := strings.Cut(o, "="); fixed {
			labels = withLabel(labels, k, val)
		} else if o == "gauge" {
			f.typ = o
		} else if o != "" {
			keyLabels = append(keyLabels, o)
		}
	}
	if i := slices.IndexFunc(p.families, func(g *family) bool { return g.name == name }); i >= 0 {
		f = p.families[i]
		f.help = cmp.Or(f.help, help)
	} else if name != "" {
		p.families = append(p.families, f)
	}
	p.value(f, v, keyLabels, labels)
}

// value adds v, a number or a map of them, to f; or walks it, a struct.
func (p *writer) value(f *family, v reflect.Value, keyLabels, labels []string) {
	switch v.Kind() {
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			p.value(f, v.MapIndex(k), keyLabels[1:], withLabel(labels, keyLabels[0], k.String()))
		}
	case reflect.Struct:
		p.walk(v, labels)
	case reflect.Int64:
		f.sample(labels, float64(v.Int()))
	case reflect.Float64:
		f.sample(labels, v.Float())
	}
}

func (f *family) sample(labels []string, v float64) {
	b := append(f.samples, f.prefix+f.name...)
	sep := byte('{')
	for i := 0; i < len(labels); i += 2 {
		b = append(b, sep)
		b = append(b, labels[i]+`="`+labelEscaper.Replace(labels[i+1])+`"`...)
		sep = ','
	}
	if len(labels) > 0 {
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	f.samples = append(b, '\n')
}

// withLabel is labels and one more, never sharing the array of labels.
func withLabel(labels []string, name, value string) []string {
	return append(labels[:len(labels):len(labels)], name, value)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
