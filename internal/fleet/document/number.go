package document

import (
	"strings"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// JSON numbers are read exactly from their literals, never through float64 first, so that
// 1.0000000000000000001 is above 1 and 9007199254740993 is above 2^53, as JSON Schema sees
// them. Exponents saturate, so 1e999999999 costs nothing.

// decimal is a JSON number literal in normal form: its value is ±digits × 10^exp, with digits
// free of leading and trailing zeros ("" for zero).
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

const expLimit = 1 << 40 // |exp| saturates here; far beyond any digit count

// parseDecimal reads lit, which the JSON decoder has already checked is a JSON number.
func parseDecimal(lit string) decimal {
	var d decimal
	s := lit
	if s != "" && s[0] == '-' {
		d.neg, s = true, s[1:]
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		d.exp, s = parseExp(s[i+1:]), s[:i]
	}
	digits := s
	if i := strings.IndexByte(s, '.'); i >= 0 {
		frac := s[i+1:]
		digits = s[:i] + frac
		d.exp -= int64(len(frac))
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return decimal{neg: d.neg}
	}
	n := len(digits)
	for digits[n-1] == '0' {
		n--
		d.exp++
	}
	d.digits = digits[:n]
	return d
}

func parseExp(s string) int64 {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	var e int64
	for i := 0; i < len(s) && e < expLimit; i++ {
		e = e*10 + int64(s[i]-'0')
	}
	e = min(e, expLimit)
	if neg {
		return -e
	}
	return e
}

// bigInt stands for every integer beyond 2^53 in either direction: it fails every range check.
const bigInt = fieldrules.MaxExactInteger + 1

// intValue returns the integer lit denotes, clamped to ±bigInt, and false if lit is not a whole
// number (1.5); 1.0 and 1e3 are whole numbers, as in JSON Schema.
func intValue(lit string) (int64, bool) {
	d := parseDecimal(lit)
	if d.digits == "" {
		return 0, true
	}
	if d.exp < 0 {
		return 0, false
	}
	var v int64 = bigInt
	if int64(len(d.digits))+d.exp <= 16 { // 2^53 has 16 digits, so this fits an int64
		v = 0
		for i := 0; i < len(d.digits); i++ {
			v = v*10 + int64(d.digits[i]-'0')
		}
		for e := int64(0); e < d.exp; e++ {
			v *= 10
		}
		v = min(v, bigInt)
	}
	if d.neg {
		return -v, true
	}
	return v, true
}

// inUnitInterval reports whether lit denotes a number from 0 to 1, inclusive.
func inUnitInterval(lit string) bool {
	d := parseDecimal(lit)
	switch {
	case d.digits == "":
		return true
	case d.neg:
		return false
	}
	intDigits := int64(len(d.digits)) + d.exp
	return intDigits < 1 || intDigits == 1 && d.digits == "1"
}

// toInt converts a clamped integer to int, keeping it out of every int field's range when it
// was out of range before (int may be 32 bits).
func toInt(v int64) int {
	const limit = 1 << 30
	return int(max(-limit, min(v, limit)))
}
