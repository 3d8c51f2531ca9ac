package pool

import "strconv"

// codeLine returns one plausible source line in the platform's language.
// The result aliases a scratch buffer, valid until the next call.
func (g *gen) codeLine(lang language) []byte {
	a, b, n := g.noun(), g.noun(), strconv.Itoa(g.r.IntN(100))
	switch lang {
	case langPython:
		return g.pythonLine(a, b, n)
	case langJavaScript:
		return g.javaScriptLine(a, b, n)
	case langJava:
		return g.cat("        ", a, "Repository.", g.camel(), "(", b, ".getId());")
	case langGo:
		return g.goLine(a, b, n)
	}
	return g.cat("        let ", a, " = ", b, "Store.", g.camel(), "()")
}

// pythonLine, javaScriptLine and goLine write a line of the language with
// the nouns a and b and the number n.
func (g *gen) pythonLine(a, b, n string) []byte {
	switch g.r.IntN(12) {
	case 0:
		return g.cat("    ", a, " = self.", g.snake(), "(", b, "_id=", b, ".id)")
	case 1:
		return g.cat("    if ", a, " is None:")
	case 2:
		return g.cat("        raise ", title(a), "Error(f\"", a, " {", b, "_id} is ", g.adjective(), "\")")
	case 3:
		return g.cat("    for ", a, " in ", b, ".", a, "s.all():")
	case 4:
		return g.cat("        total += ", a, ".quantity * ", a, ".unit_price")
	case 5:
		return g.cat("    logger.info(\"", g.verb(), " %s\", ", a, ".pk)")
	case 6:
		return g.cat("    return ", title(a), "Serializer(", a, ", many=", pyBool(g.r.IntN(2) == 0), ").data")
	case 7:
		return g.cat("    ", a, "s = ", title(a), ".objects.filter(", b, "=", b, ", status=\"", g.adjective(), "\")")
	case 8:
		return g.cat("")
	case 9:
		return g.cat("    # ", g.verb(), " the ", a, " before ", gerund(g.verb()), " ", b)
	case 10:
		return g.cat("def ", g.snake(), "(self, ", a, ", ", b, "=None, **kwargs):")
	}
	return g.cat("        ", a, ".", b, " = ", n)
}

func (g *gen) javaScriptLine(a, b, n string) []byte {
	switch g.r.IntN(12) {
	case 0:
		return g.cat("  const ", a, " = await ", g.camel(), "(", b, ".id);")
	case 1:
		return g.cat("  if (!", a, "?.", b, ") {")
	case 2:
		return g.cat("    throw new Error(`", a, " ${", b, ".id} is ", g.adjective(), "`);")
	case 3:
		return g.cat("  return ", a, "s.map((", a[:1], ") => ", a[:1], ".", b, " * ", n, ");")
	case 4:
		return g.cat("  }")
	case 5:
		return g.cat("")
	case 6:
		return g.cat("  // ", g.verb(), " ", a, " before ", gerund(g.verb()), " ", b)
	case 7:
		return g.cat("  set", title(a), "(prev => ({ ...prev, ", b, ": ", n, " }));")
	case 8:
		return g.cat("export function ", g.camel(), "(", a, ", ", b, ") {")
	case 9:
		return g.cat("  const { data } = await api.get(`/", a, "s/${", b, "Id}`);")
	case 10:
		return g.cat("  ", a, ".", b, " = ", a, ".", b, " ?? ", n, ";")
	}
	return g.cat("  console.debug('", g.verb(), "', ", a, ");")
}

func (g *gen) goLine(a, b, n string) []byte {
	switch g.r.IntN(10) {
	case 0:
		return g.cat("\t", a, ", err := s.", title(g.camel()), "(ctx, ", b, "ID)")
	case 1:
		return g.cat("\tif err != nil {")
	case 2:
		return g.cat("\t\treturn nil, fmt.Errorf(\"", g.verb(), " ", a, " %d: %w\", ", b, "ID, err)")
	case 3:
		return g.cat("\t}")
	case 4:
		return g.cat("")
	case 5:
		return g.cat("\tfor _, ", a[:1], " := range ", b, "s {")
	case 6:
		return g.cat("\t// ", g.verb(), " the ", a, " before ", gerund(g.verb()), " ", b)
	case 7:
		return g.cat("func (s *", title(a), "Service) ", title(g.camel()), "(ctx context.Context, id int64) error {")
	case 8:
		return g.cat("\trows, err := s.db.QueryContext(ctx, query", title(a), ", id)")
	}
	return g.cat("\t", a, ".", title(b), " = ", n)
}

// cat concatenates parts into the line scratch buffer.
func (g *gen) cat(parts ...string) []byte {
	g.lb = g.lb[:0]
	for _, p := range parts {
		g.lb = append(g.lb, p...)
	}
	return g.lb
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// varValue returns a repr-style local variable value.
func (g *gen) varValue(lang language) (string, func(w *jw)) {
	switch g.r.IntN(7) {
	case 0:
		v := int64(g.r.IntN(100000))
		return "", func(w *jw) { w.int(v) }
	case 1:
		s := "'" + g.adjective() + "'"
		return s, nil
	case 2:
		if lang == langPython {
			return "<" + title(g.noun()) + ": " + title(g.noun()) + " object (" + strconv.Itoa(g.r.IntN(99999)) + ")>", nil
		}
		return "[object Object]", nil
	case 3:
		return "None", nil
	case 4:
		x := g.r.Float64() * 1000
		return "", func(w *jw) { w.float(x, 2) }
	case 5:
		return "<" + g.pascal() + " at 0x7f" + g.hexID(10) + ">", nil
	}
	return "[" + strconv.Itoa(g.r.IntN(50)) + ", " + strconv.Itoa(g.r.IntN(50)) + ", '...']", nil
}
