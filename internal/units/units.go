// Package units parses and formats byte sizes such as "64MiB" or "1.5 GiB".
package units

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
)

// Sentinel errors wrapped by ParseBytes. Test for them with [errors.Is].
var (
	// ErrSyntax reports a size that is not a number followed by a known
	// unit.
	ErrSyntax = errors.New("invalid syntax")
	// ErrRange reports a size that is negative or does not fit in an int64.
	ErrRange = errors.New("value out of range")
)

// maxInputLen bounds the length of the strings ParseBytes accepts, which
// keeps the cost of exact decimal arithmetic trivially small.
const maxInputLen = 64

// multipliers maps lower-cased unit names to their size in bytes. Decimal
// (SI) units are powers of 1000, binary (IEC) units powers of 1024.
var multipliers = map[string]uint64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"pb":  1e15,
	"eb":  1e18,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"pib": 1 << 50,
	"eib": 1 << 60,
}

// ParseBytes parses a byte size: a non-negative decimal number, optionally
// with a fractional part, optionally followed by spaces and a unit. Units
// are case-insensitive: B (bytes, also the default), the decimal kB, MB,
// GB, TB, PB, EB (powers of 1000) and the binary KiB, MiB, GiB, TiB, PiB,
// EiB (powers of 1024). Single-letter units such as "K" or "G" are rejected
// as ambiguous. Examples: "4096", "10B", "100kB", "512KiB", "1.5GiB",
// "64 MiB".
//
// A fractional number of bytes ("1.5B") is an error; a fraction of a larger
// unit is rounded to the nearest byte, halves away from zero. Errors wrap
// [ErrSyntax] for malformed input and [ErrRange] for negative sizes and
// sizes above math.MaxInt64 bytes.
func ParseBytes(s string) (int64, error) {
	if len(s) > maxInputLen {
		return 0, fmt.Errorf("units: size %.20q... is too long: %w", s, ErrSyntax)
	}
	in := strings.TrimSpace(s)
	fail := func(err error, format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("units: invalid size %q: %s: %w", s, fmt.Sprintf(format, args...), err)
	}
	if in == "" {
		return fail(ErrSyntax, "empty")
	}
	if in[0] == '-' {
		return fail(ErrRange, "negative")
	}
	// Split into number and unit.
	i := 0
	for i < len(in) && (isDigit(in[i]) || in[i] == '.') {
		i++
	}
	num, unit := in[:i], strings.ToLower(strings.TrimLeft(in[i:], " \t"))
	intPart, frac, hasDot := strings.Cut(num, ".")
	if intPart == "" || (hasDot && frac == "") || strings.Contains(frac, ".") {
		return fail(ErrSyntax, "want a number such as 64 or 1.5 before the unit")
	}
	mult, ok := multipliers[unit]
	if !ok {
		return fail(ErrSyntax, "unknown unit %q (want B, kB, MB, GB, TB, PB, EB, KiB, MiB, GiB, TiB, PiB or EiB)", in[i:])
	}
	if mult == 1 && strings.Trim(frac, "0") != "" {
		return fail(ErrSyntax, "fractional number of bytes")
	}
	// Exact arithmetic: value = (intPart + frac/10^len(frac)) * mult.
	v, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return fail(ErrSyntax, "bad number")
	}
	v.Mul(v, new(big.Int).SetUint64(mult))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	// Round to nearest: (2v + den) / (2den).
	v.Lsh(v, 1).Add(v, den)
	v.Quo(v, den.Lsh(den, 1))
	if !v.IsInt64() {
		return fail(ErrRange, "larger than %d bytes", int64(math.MaxInt64))
	}
	return v.Int64(), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// binaryUnits are the units FormatBytes uses, from the largest down.
var binaryUnits = []struct {
	name string
	size uint64
}{
	{"EiB", 1 << 60}, {"PiB", 1 << 50}, {"TiB", 1 << 40},
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
}

// FormatBytes formats n bytes with the largest binary unit not exceeding
// it and at most two decimals, trailing zeros dropped: 1536 -> "1.5 KiB",
// 1<<30 -> "1 GiB", 1000 -> "1000 B". Fractions are truncated, never
// rounded up, so ParseBytes(FormatBytes(n)) is at most n and within 1% of a
// unit below it. Negative sizes are formatted with a leading minus sign.
func FormatBytes(n int64) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign = "-"
		u = -u // two's complement magnitude, correct for math.MinInt64 too
	}
	for _, unit := range binaryUnits {
		if u < unit.size {
			continue
		}
		whole, rem := u/unit.size, u%unit.size
		// hundredths = rem*100/unit.size without overflow.
		hi, lo := bits.Mul64(rem, 100)
		hundredths, _ := bits.Div64(hi, lo, unit.size)
		s := sign + strconv.FormatUint(whole, 10)
		if hundredths != 0 {
			f := fmt.Sprintf("%02d", hundredths)
			s += "." + strings.TrimRight(f, "0")
		}
		return s + " " + unit.name
	}
	return sign + strconv.FormatUint(u, 10) + " B"
}
