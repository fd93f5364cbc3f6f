package early

// policy is the program policy, the JSON object the sandbox package
// writes (its programPolicy): {"ro":[...],"rw":[...],"tcp":[...],"env":[...]}.
type policy struct {
	ro, rw []string
	tcp    []uint16
	env    []string
}

// parsePolicy reads data as encoding/json reads it into the sandbox
// package's programPolicy, for the JSON that encoding/json writes: no
// white space, each field at most once, by its exact name, and strings
// of valid UTF-8 without escaped surrogates. Anything else, valid JSON or
// not, is not ok, and left to encoding/json.
func parsePolicy(data string) (policy, bool) {
	var p policy
	d := decoder{s: data}
	if !d.next('{') {
		return p, false
	}
	seen := map[string]bool{}
	for first := true; !d.next('}'); first = false {
		if !first && !d.next(',') {
			return p, false
		}
		name, ok := d.str()
		if !ok || seen[name] || !d.next(':') {
			return p, false
		}
		seen[name] = true
		switch name {
		case "ro":
			p.ro, ok = d.strs()
		case "rw":
			p.rw, ok = d.strs()
		case "env":
			p.env, ok = d.strs()
		case "tcp":
			p.tcp, ok = d.ports()
		default:
			ok = false
		}
		if !ok {
			return p, false
		}
	}
	return p, d.i == len(d.s)
}

// decoder reads s from i.
type decoder struct {
	s string
	i int
}

// next consumes c when it is next.
func (d *decoder) next(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// array reads an array, each element by elem.
func (d *decoder) array(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	for first := true; !d.next(']'); first = false {
		if !first && !d.next(',') || !elem() {
			return false
		}
	}
	return true
}

// strs reads an array of strings.
func (d *decoder) strs() ([]string, bool) {
	list := []string{}
	ok := d.array(func() bool {
		s, ok := d.str()
		list = append(list, s)
		return ok
	})
	return list, ok
}

// ports reads an array of TCP ports.
func (d *decoder) ports() ([]uint16, bool) {
	list := []uint16{}
	ok := d.array(func() bool {
		start, n := d.i, 0
		for d.i < len(d.s) && '0' <= d.s[d.i] && d.s[d.i] <= '9' && n <= 65535 {
			n = n*10 + int(d.s[d.i]-'0')
			d.i++
		}
		digits := d.s[start:d.i]
		if digits == "" || len(digits) > 1 && digits[0] == '0' || n > 65535 {
			return false
		}
		list = append(list, uint16(n))
		return true
	})
	return list, ok
}

// str reads a string.
func (d *decoder) str() (string, bool) {
	if !d.next('"') {
		return "", false
	}
	var b []byte
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return string(b), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if d.i+1 >= len(d.s) {
				return "", false
			}
			e := d.s[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok || 0xD800 <= r && r <= 0xDFFF {
					return "", false
				}
				b = appendRune(b, r)
			default:
				return "", false
			}
		case c < 0x80:
			b = append(b, c)
			d.i++
		default:
			n := utf8Len(d.s[d.i:])
			if n == 0 {
				return "", false
			}
			b = append(b, d.s[d.i:d.i+n]...)
			d.i += n
		}
	}
	return "", false
}

// hex4 reads the four hexadecimal digits of a \u escape.
func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(d.s[d.i : d.i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}

// appendRune appends the UTF-8 encoding of r (below 0x10000, not a
// surrogate) to b.
func appendRune(b []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(b, byte(r))
	case r < 0x800:
		return append(b, 0xC0|byte(r>>6), 0x80|byte(r)&0x3F)
	}
	return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}

// utf8Len is the length of the valid UTF-8 sequence of a character
// other than ASCII at the start of s, 0 when there is none.
func utf8Len(s string) int {
	cont := func(i int, lo, hi byte) bool { return i < len(s) && lo <= s[i] && s[i] <= hi }
	c := s[0]
	switch {
	case 0xC2 <= c && c <= 0xDF:
		if cont(1, 0x80, 0xBF) {
			return 2
		}
	case 0xE0 <= c && c <= 0xEF:
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xE0 {
			lo = 0xA0 // not overlong
		} else if c == 0xED {
			hi = 0x9F // not a surrogate
		}
		if cont(1, lo, hi) && cont(2, 0x80, 0xBF) {
			return 3
		}
	case 0xF0 <= c && c <= 0xF4:
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xF0 {
			lo = 0x90 // not overlong
		} else if c == 0xF4 {
			hi = 0x8F // not above U+10FFFF
		}
		if cont(1, lo, hi) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) {
			return 4
		}
	}
	return 0
}
