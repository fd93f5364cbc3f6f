package scrub

import "strings"

// Mask replaces what is scrubbed.
const Mask = "[secret]"

// URLs masks the credentials of every URL (scheme://…) in text, wherever
// it appears in it, and keeps the rest of the text as it is:
//
//   - the user info: "https://[secret]@host/…", a password alone for ssh
//     URLs, whose user is a login name ("ssh://git:[secret]@host/…");
//   - the value of every query or fragment parameter whose name says it
//     is a credential (token, private_token, access_token, password,
//     secret, key, signature, sig, auth, credential, …):
//     "https://host/p?private_token=[secret]&ref=main".
//
// A URL ends at white space, a quote or an angle bracket. A value ends at
// "&", ";" or its JSON escape "\u0026". URLs is idempotent.
func URLs(text string) string {
	i := strings.Index(text, "://")
	if i < 0 {
		return text
	}
	var b strings.Builder
	done := 0 // text[:done] is in b, or unchanged when b is empty
	for i >= 0 {
		start := i
		for start > 0 && schemeByte(text[start-1]) {
			start--
		}
		for start < i && !isLetter(text[start]) {
			start++ // a scheme starts with a letter
		}
		end := i + 3
		for end < len(text) && !urlEnd(text[end]) {
			end++
		}
		if start < i {
			if red := redactURL(text[start:end], text[start:i]); red != text[start:end] {
				b.WriteString(text[done:start])
				b.WriteString(red)
				done = end
			}
		}
		next := strings.Index(text[end:], "://")
		if next < 0 {
			break
		}
		i = end + next
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func schemeByte(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// urlEnd says whether c ends a URL found in text.
func urlEnd(c byte) bool {
	switch c {
	case '"', '\'', '<', '>', '`', '{', '}', '|', 0x7f:
		return true
	}
	return c <= ' '
}

// redactURL masks the credentials of u, a URL of scheme; it returns u
// itself when it has none.
func redactURL(u, scheme string) string {
	head, rest := u[:len(scheme)+3], u[len(scheme)+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	auth, path := rest[:authEnd], rest[authEnd:]
	frag, query := "", ""
	if h := strings.IndexByte(path, '#'); h >= 0 {
		path, frag = path[:h], path[h:]
	}
	if q := strings.IndexByte(path, '?'); q >= 0 {
		path, query = path[:q+1], path[q+1:]
	}
	cleanAuth, cleanQuery, cleanFrag := auth, redactParams(query), frag
	if at := strings.LastIndexByte(auth, '@'); at > 0 {
		cleanAuth = redactUserinfo(auth[:at], scheme) + auth[at:]
	}
	if strings.IndexByte(frag, '=') >= 0 {
		cleanFrag = "#" + redactParams(frag[1:]) // OAuth puts tokens there
	}
	if cleanAuth == auth && cleanQuery == query && cleanFrag == frag {
		return u
	}
	return head + cleanAuth + path + cleanQuery + cleanFrag
}

// redactUserinfo masks a URL's user info: all of it, since a lone user
// of an http URL is often a token (https://TOKEN@host), except the user
// of an ssh URL, which is a login name.
func redactUserinfo(ui, scheme string) string {
	switch strings.ToLower(scheme) {
	case "ssh", "git+ssh", "ssh+git", "sftp":
		user, pass, ok := strings.Cut(ui, ":")
		if !ok || pass == "" {
			return ui
		}
		return user + ":" + Mask
	}
	return Mask
}

// redactParams masks the values of the credential parameters of a query
// (or a fragment that holds parameters). Other values are kept; a URL in
// one has its own credentials masked.
func redactParams(q string) string {
	var b strings.Builder
	rest, done := q, 0 // q[:done] is in b, or unchanged when b is empty
	for rest != "" {
		i, sep := nextSep(rest)
		param, at := rest[:i], len(q)-len(rest)
		rest = rest[i+len(sep):]
		k, v, ok := strings.Cut(param, "=")
		if !ok || v == "" {
			continue
		}
		clean := v
		switch {
		case credentialParam(k):
			// A value cut by the quote of a JSON string keeps its
			// backslash, so that the string stays whole.
			clean = Mask
			if strings.HasSuffix(v, `\`) {
				clean += `\`
			}
		case strings.Contains(v, "://"):
			clean = URLs(v)
		}
		if clean != v {
			b.WriteString(q[done : at+len(k)+1])
			b.WriteString(clean)
			done = at + len(param)
		}
	}
	if b.Len() == 0 {
		return q
	}
	b.WriteString(q[done:])
	return b.String()
}

// nextSep finds the end of q's first parameter and the separator there
// ("" at the end).
func nextSep(q string) (int, string) {
	for i := 0; i < len(q); i++ {
		switch {
		case q[i] == '&' || q[i] == ';':
			return i, q[i : i+1]
		case q[i] == '\\' && strings.HasPrefix(q[i:], `\u0026`):
			return i, `\u0026`
		}
	}
	return len(q), ""
}

// credentialWords mark a parameter name as a credential's.
var credentialWords = []string{"token", "secret", "passw", "pwd", "passphrase", "key", "signature",
	"credential", "auth", "private", "session"}

// credentialParam says whether a query parameter named k holds a
// credential.
func credentialParam(k string) bool {
	k = strings.ToLower(k)
	switch k {
	case "sig", "pass", "pw", "code":
		return true
	}
	for _, w := range credentialWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
