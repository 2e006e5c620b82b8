// Package strictjson decodes JSON request bodies strictly. encoding/json
// alone accepts a body of `null` (leaving the target at its defaults),
// ignores anything after the first value, and lets a repeated key
// silently overwrite the earlier one: each of those lets a request mean
// something other than what a reader of it sees. Decode refuses all three,
// and unknown fields as well.
//
// The check is a pass over encoding/json's token stream (Check) before
// the ordinary decode, so the rules hold for any target type.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// MaxDepth bounds how deeply objects and arrays may nest. dpfl's request
// bodies nest three levels at most; the bound keeps a hostile body of a
// million brackets from costing more than a few bytes of state.
const MaxDepth = 32

// Error is a body that breaks one of the rules. Path is the JSON path of
// the offending key (e.g. "dp.delta" or "shares[2].to"), "" when the rule
// concerns the whole body.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Decode decodes b, which must hold exactly one JSON object, into v (a
// pointer). It refuses, with an *Error or encoding/json's error:
// anything but an object at the top (`null` included), a key repeated
// within one object at any depth, data after the object, nesting deeper
// than MaxDepth, and keys that match no field of v.
func Decode(b []byte, v any) error {
	if err := Check(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Check has seen the end of the body already; this keeps Decode
	// correct on its own should Check ever change.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &Error{Msg: "unexpected data after the JSON object"}
	}
	return nil
}

// frame is one open object or array of the token walk.
type frame struct {
	object  bool
	path    string
	keys    map[string]bool // folded keys seen so far (objects)
	wantKey bool            // objects: the next token is a key or '}'
	key     string          // objects: the key whose value comes next
	index   int             // arrays: the index of the next element
}

// Check reports whether b is exactly one JSON object with no repeated key
// in any of its objects, nested at most MaxDepth deep. Keys are compared
// as encoding/json matches them to struct fields, without regard to case
// ("Rounds" repeats "rounds"), since either would set the same field.
func Check(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // no float parsing here: only the structure matters
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return &Error{Msg: "empty body: want a JSON object"}
	case err != nil:
		return &Error{Msg: "malformed JSON: " + err.Error()}
	case tok != json.Delim('{'):
		return &Error{Msg: "want a JSON object, got " + describe(tok)}
	}
	stack := []frame{{object: true, keys: map[string]bool{}, wantKey: true}}
	for len(stack) > 0 {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return &Error{Path: stack[len(stack)-1].path, Msg: "malformed JSON: " + err.Error()}
		}
		top := &stack[len(stack)-1]
		if top.object && top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			key, _ := tok.(string) // the decoder yields only strings here
			f := fold(key)
			if top.keys[f] {
				return &Error{Path: JoinPath(top.path, key), Msg: "repeated key: each key may appear once in an object"}
			}
			top.keys[f] = true
			top.key, top.wantKey = key, false
			continue
		}
		path := top.path
		if top.object {
			path = JoinPath(path, top.key)
			top.wantKey = true
		} else {
			if tok == json.Delim(']') {
				stack = stack[:len(stack)-1]
				continue
			}
			path += "[" + strconv.Itoa(top.index) + "]"
			top.index++
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= MaxDepth {
				return &Error{Path: path, Msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
			}
			stack = append(stack, frame{object: tok == json.Delim('{'), path: path, keys: map[string]bool{}, wantKey: true})
		}
	}
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		what := "malformed data"
		if err == nil {
			what = describe(tok)
		}
		return &Error{Msg: "unexpected data after the JSON object: " + what + " (send exactly one object)"}
	}
	return nil
}

// maxKeyShown bounds how much of a key an error message repeats.
const maxKeyShown = 64

// JoinPath appends key to the dotted JSON path path ("" for the top
// level), cut to maxKeyShown bytes: paths go back in error messages, and
// a hostile body's keys may be long.
func JoinPath(path, key string) string {
	if len(key) > maxKeyShown {
		key = strings.ToValidUTF8(key[:maxKeyShown], "") + "…"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names a top-level token for an error message.
func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "a " + string(t)
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%v", tok)
}

// fold maps key to a canonical form under Unicode simple case folding
// (each rune to the smallest rune of its folding orbit), the equivalence
// encoding/json uses to match keys to struct fields.
func fold(key string) string {
	var b strings.Builder
	for _, r := range key {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}
