package npy

import (
	"fmt"
	"math"
	"strings"
)

// This file holds a parser for the small subset of Python literal syntax
// that appears in .npy header dicts: a dict whose keys are strings and whose
// values are strings, integers, True, False, None, tuples and lists. It is
// deliberately strict; anything else is reported as malformed.

type valueKind int

const (
	kindString valueKind = iota
	kindInt
	kindBool
	kindNone
	kindTuple
	kindList
)

func (k valueKind) String() string {
	switch k {
	case kindString:
		return "a string"
	case kindInt:
		return "an integer"
	case kindBool:
		return "a boolean"
	case kindNone:
		return "None"
	case kindTuple:
		return "a tuple"
	default:
		return "a list"
	}
}

// pyValue is a parsed Python literal.
type pyValue struct {
	kind  valueKind
	str   string    // kindString
	num   int64     // kindInt: magnitude, valid unless big
	neg   bool      // kindInt: had a leading minus sign
	big   bool      // kindInt: magnitude does not fit in int64
	b     bool      // kindBool
	items []pyValue // kindTuple, kindList
}

type dictParser struct {
	s      []byte
	i      int
	allowL bool // accept Python 2 long suffix on integers
}

func (p *dictParser) errorf(format string, args ...any) error {
	return formatErr("malformed header dict at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

// skipSpace skips the whitespace Python allows inside brackets.
func (p *dictParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r', '\f':
			p.i++
		default:
			return
		}
	}
}

func (p *dictParser) peek() (byte, bool) {
	if p.i >= len(p.s) {
		return 0, false
	}
	return p.s[p.i], true
}

// parseDict parses a header dict and returns the validated shape.
func parseDict(s []byte, allowL bool) (rows, cols int, err error) {
	p := &dictParser{s: s, allowL: allowL}
	if err := p.open(); err != nil {
		return 0, 0, err
	}
	h := headerDict{seen: map[string]bool{}}
	for {
		closed, err := p.entry(&h)
		if err != nil {
			return 0, 0, err
		}
		if closed {
			break
		}
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return 0, 0, p.errorf("unexpected %q after dict", trim(p.s[p.i:]))
	}
	return h.dims()
}

// open consumes the dict's opening brace and the spaces and tabs before it
// (tolerated, as by ast.literal_eval).
func (p *dictParser) open() error {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
	if c, ok := p.peek(); !ok || c != '{' {
		if !ok {
			return p.errorf("empty header, want '{'")
		}
		return p.errorf("got %q, want '{'", c)
	}
	p.i++
	return nil
}

// entry parses the next key: value entry of the dict into h, with the ','
// or '}' after it, and reports whether the dict is closed. A '}' in place
// of the entry (an empty dict, or one with a trailing comma) closes it too.
func (p *dictParser) entry(h *headerDict) (closed bool, err error) {
	p.skipSpace()
	c, ok := p.peek()
	if !ok {
		return false, p.errorf("unterminated dict")
	}
	if c == '}' {
		p.i++
		return true, nil
	}
	key, val, err := p.keyValue()
	if err != nil {
		return false, err
	}
	if err := h.set(key, val); err != nil {
		return false, err
	}
	p.skipSpace()
	c, ok = p.peek()
	switch {
	case !ok:
		return false, p.errorf("unterminated dict")
	case c == ',':
		p.i++
		return false, nil
	case c == '}':
		p.i++
		return true, nil
	default:
		return false, p.errorf("got %q, want ',' or '}'", c)
	}
}

// keyValue parses a string key, the ':' after it and its value.
func (p *dictParser) keyValue() (key string, val pyValue, err error) {
	keyPos := p.i
	k, err := p.parseValue(0)
	if err != nil {
		return "", pyValue{}, err
	}
	if k.kind != kindString {
		p.i = keyPos
		return "", pyValue{}, p.errorf("dict key is %s, want a string", k.kind)
	}
	p.skipSpace()
	if c, ok := p.peek(); !ok || c != ':' {
		return "", pyValue{}, p.errorf("want ':' after key %q", k.str)
	}
	p.i++
	p.skipSpace()
	val, err = p.parseValue(0)
	if err != nil {
		return "", pyValue{}, err
	}
	return k.str, val, nil
}

// headerDict collects the values of a header dict's three keys.
type headerDict struct {
	descr, fortran, shape pyValue
	seen                  map[string]bool
}

// set records the value of key, which must be one of the three keys and
// must not be seen before.
func (h *headerDict) set(key string, val pyValue) error {
	if h.seen[key] {
		return formatErr("duplicate key %q in header dict", key)
	}
	h.seen[key] = true
	switch key {
	case "descr":
		h.descr = val
	case "fortran_order":
		h.fortran = val
	case "shape":
		h.shape = val
	default:
		return formatErr("unknown key %q in header dict", key)
	}
	return nil
}

// dims checks that the dict has all three keys and returns the validated
// shape.
func (h *headerDict) dims() (rows, cols int, err error) {
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !h.seen[k] {
			return 0, 0, formatErr("header dict has no %q key", k)
		}
	}
	return validate(h.descr, h.fortran, h.shape)
}

// trim shortens b for inclusion in an error message.
func trim(b []byte) string {
	const n = 32
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

func validate(descr, fortran, shape pyValue) (rows, cols int, err error) {
	switch descr.kind {
	case kindString:
		if descr.str != "<f8" {
			hint := ""
			switch descr.str {
			case "=f8", "f8", "|f8", "<d", "=d", "d", "float64", "double":
				hint = " (only the explicit little-endian spelling '<f8' is accepted)"
			case ">f8", ">d":
				hint = " (big-endian)"
			}
			return 0, 0, unsupportedErr("dtype %q, want '<f8'%s", descr.str, hint)
		}
	case kindList:
		return 0, 0, unsupportedErr("structured dtype, want '<f8'")
	default:
		return 0, 0, formatErr("'descr' is %s, want a string", descr.kind)
	}
	if fortran.kind != kindBool {
		return 0, 0, formatErr("'fortran_order' is %s, want True or False", fortran.kind)
	}
	if fortran.b {
		return 0, 0, unsupportedErr("fortran_order True (column-major data); only C order is supported")
	}
	if shape.kind != kindTuple {
		return 0, 0, formatErr("'shape' is %s, want a tuple", shape.kind)
	}
	for _, d := range shape.items {
		if d.kind != kindInt {
			return 0, 0, formatErr("shape element is %s, want an integer", d.kind)
		}
		if d.neg && (d.num != 0 || d.big) {
			return 0, 0, formatErr("negative dimension in shape")
		}
		if d.big || d.num > math.MaxInt {
			return 0, 0, formatErr("dimension too large in shape")
		}
	}
	if n := len(shape.items); n != 2 {
		return 0, 0, unsupportedErr("%d-dimensional array, want 2-dimensional", n)
	}
	return int(shape.items[0].num), int(shape.items[1].num), nil
}

func (p *dictParser) parseValue(depth int) (pyValue, error) {
	if depth > maxDepth {
		return pyValue{}, p.errorf("nesting deeper than %d", maxDepth)
	}
	c, ok := p.peek()
	if !ok {
		return pyValue{}, p.errorf("unexpected end, want a value")
	}
	switch {
	case c == '\'' || c == '"':
		return p.parseString(c)
	case c == '(':
		return p.parseSeq(depth, ')')
	case c == '[':
		return p.parseSeq(depth, ']')
	case c == '-' || isDigit(c):
		return p.parseInt()
	case isIdentStart(c):
		start := p.i
		for p.i < len(p.s) && isIdentChar(p.s[p.i]) {
			p.i++
		}
		switch name := string(p.s[start:p.i]); name {
		case "True":
			return pyValue{kind: kindBool, b: true}, nil
		case "False":
			return pyValue{kind: kindBool}, nil
		case "None":
			return pyValue{kind: kindNone}, nil
		default:
			p.i = start
			return pyValue{}, p.errorf("unexpected name %q", trim([]byte(name)))
		}
	default:
		return pyValue{}, p.errorf("unexpected %q, want a value", c)
	}
}

func (p *dictParser) parseString(quote byte) (pyValue, error) {
	start := p.i
	p.i++
	for p.i < len(p.s) {
		switch c := p.s[p.i]; c {
		case quote:
			v := pyValue{kind: kindString, str: string(p.s[start+1 : p.i])}
			p.i++
			return v, nil
		case '\\':
			return pyValue{}, p.errorf("escape sequences in strings are not supported")
		case '\n', '\r':
			return pyValue{}, p.errorf("newline in string")
		}
		p.i++
	}
	p.i = start
	return pyValue{}, p.errorf("unterminated string")
}

// parseSeq parses a tuple or list; the opening bracket is at p.i. Like
// Python, "(x)" is a parenthesized x rather than a one-element tuple.
func (p *dictParser) parseSeq(depth int, closer byte) (pyValue, error) {
	kind := kindList
	if closer == ')' {
		kind = kindTuple
	}
	p.i++
	var items []pyValue
	sawComma := false
	for {
		p.skipSpace()
		c, ok := p.peek()
		if !ok {
			return pyValue{}, p.errorf("unterminated %s", kind)
		}
		if c == closer {
			p.i++
			break
		}
		v, err := p.parseValue(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		items = append(items, v)
		p.skipSpace()
		c, ok = p.peek()
		switch {
		case !ok:
			return pyValue{}, p.errorf("unterminated %s", kind)
		case c == ',':
			p.i++
			sawComma = true
			continue
		case c == closer:
			p.i++
		default:
			return pyValue{}, p.errorf("got %q, want ',' or %q", c, closer)
		}
		break
	}
	if kind == kindTuple && len(items) == 1 && !sawComma {
		return items[0], nil
	}
	return pyValue{kind: kind, items: items}, nil
}

func (p *dictParser) parseInt() (pyValue, error) {
	v := pyValue{kind: kindInt}
	if p.s[p.i] == '-' {
		v.neg = true
		p.i++
	}
	start := p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		d := int64(p.s[p.i] - '0')
		if !v.big {
			if v.num > (math.MaxInt64-d)/10 {
				v.big = true
			} else {
				v.num = v.num*10 + d
			}
		}
		p.i++
	}
	switch n := p.i - start; {
	case n == 0:
		return pyValue{}, p.errorf("'-' not followed by digits")
	case n > 1 && p.s[start] == '0' && strings.Trim(string(p.s[start:p.i]), "0") != "":
		p.i = start
		return pyValue{}, p.errorf("integer with leading zero")
	}
	if p.allowL && p.i < len(p.s) && (p.s[p.i] == 'L' || p.s[p.i] == 'l') {
		p.i++
	}
	if p.i < len(p.s) && (isIdentChar(p.s[p.i]) || p.s[p.i] == '.') {
		return pyValue{}, p.errorf("unexpected %q in integer", p.s[p.i])
	}
	return v, nil
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }
