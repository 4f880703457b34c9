package units

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"4096", 4096},
		{"10B", 10},
		{"10b", 10},
		{"1.0B", 1},
		{"100kB", 100_000},
		{"100KB", 100_000},
		{"100MB", 100_000_000},
		{"2GB", 2_000_000_000},
		{"3TB", 3e12},
		{"1PB", 1e15},
		{"9EB", 9e18},
		{"512KiB", 512 << 10},
		{"512kib", 512 << 10},
		{"64MiB", 64 << 20},
		{"64MIB", 64 << 20},
		{"2GiB", 2 << 30},
		{"1.5GiB", 3 << 29},
		{"1.5 GiB", 3 << 29},
		{"  64 MiB\t", 64 << 20},
		{"0.5KiB", 512},
		{"0.3KiB", 307},          // 307.2 rounds down
		{"0.0005KiB", 1},         // 0.512 rounds up
		{"0.00048828125KiB", 1},  // exactly 0.5 rounds away from zero
		{"1.001kB", 1001},        // exact decimal arithmetic
		{"0000012MiB", 12 << 20}, // leading zeros are harmless
		{"1.25TiB", 5 << 38},
		{"7EiB", 7 << 60},
		{"7.99EiB", 9211842821808707338}, // 7.99 * 2^60 = 9211842821808707338.24
		{"9223372036854775807", math.MaxInt64},
		{"9223372036854775807B", math.MaxInt64},
		{"9.223372036854775807EB", math.MaxInt64},
	} {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseBytesErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"", ErrSyntax},
		{"   ", ErrSyntax},
		{"MiB", ErrSyntax},
		{"abc", ErrSyntax},
		{"12abc", ErrSyntax},
		{"12 34", ErrSyntax},
		{"1.5B", ErrSyntax},
		{"1.5", ErrSyntax},
		{".5GiB", ErrSyntax},
		{"5.GiB", ErrSyntax},
		{"1.2.3MiB", ErrSyntax},
		{"1e6", ErrSyntax},
		{"0x10", ErrSyntax},
		{"+5MiB", ErrSyntax},
		{"1_000", ErrSyntax},
		{"1,000", ErrSyntax},
		{"5K", ErrSyntax},
		{"5G", ErrSyntax},
		{"5 M B", ErrSyntax},
		{"5MiBs", ErrSyntax},
		{"5MiB extra", ErrSyntax},
		{"Inf", ErrSyntax},
		{"NaN", ErrSyntax},
		{"５MiB", ErrSyntax},
		{strings.Repeat("1", 65), ErrSyntax},
		{"-1", ErrRange},
		{"-5MiB", ErrRange},
		{"-0", ErrRange},
		{"8EiB", ErrRange},
		{"9223372036854775808", ErrRange},
		{"9.3EB", ErrRange},
		{"99999999999999999999999999GiB", ErrRange},
		{"18446744073709551616", ErrRange},
	} {
		got, err := ParseBytes(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want error wrapping %v", tc.in, got, err, tc.want)
			continue
		}
		if got != 0 {
			t.Errorf("ParseBytes(%q) returned %d with an error", tc.in, got)
		}
		if !strings.HasPrefix(err.Error(), "units: ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{1000, "1000 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1025, "1 KiB"},
		{1045, "1.02 KiB"},
		{1536, "1.5 KiB"},
		{1 << 20, "1 MiB"},
		{64 << 20, "64 MiB"},
		{3 << 29, "1.5 GiB"},
		{1<<30 - 1, "1023.99 MiB"},
		{5 << 38, "1.25 TiB"},
		{1 << 50, "1 PiB"},
		{1 << 60, "1 EiB"},
		{math.MaxInt64, "7.99 EiB"},
		{-1536, "-1.5 KiB"},
		{math.MinInt64, "-8 EiB"},
	} {
		if got := FormatBytes(tc.in); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// checkRoundTrip asserts that FormatBytes(n) parses back to a value no
// larger than n and less than 1% of its unit below it.
func checkRoundTrip(t *testing.T, n int64) {
	t.Helper()
	s := FormatBytes(n)
	got, err := ParseBytes(s)
	if err != nil {
		t.Fatalf("ParseBytes(FormatBytes(%d) = %q): %v", n, s, err)
	}
	unit := int64(1)
	for _, u := range binaryUnits {
		if uint64(n) >= u.size {
			unit = int64(u.size)
			break
		}
	}
	if got > n || n-got > unit/100+1 {
		t.Fatalf("FormatBytes(%d) = %q parses to %d (off by %d, unit %d)", n, s, got, n-got, unit)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1023, 1024, 1025, 1<<20 + 1, 123456789, 1<<40 - 1, math.MaxInt64 - 1, math.MaxInt64} {
		checkRoundTrip(t, n)
	}
	for shift := range 63 {
		for _, d := range []int64{-1, 0, 1} {
			if n := int64(1)<<shift + d; n >= 0 {
				checkRoundTrip(t, n)
			}
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range []string{"0", "4096", "10B", "100kB", "1.5GiB", " 64 MiB ", "-1", "8EiB", "1.5B", ".5", "abc", "", "9.223372036854775807EB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			if n != 0 || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrRange)) {
				t.Fatalf("ParseBytes(%q) = %d, %v", s, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		checkRoundTrip(t, n)
	})
}

func FuzzFormatBytes(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, n := range []int64{0, 1, 1024, 1536, math.MaxInt64, 1 << 62} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		if n < 0 {
			if s := FormatBytes(n); !strings.HasPrefix(s, "-") {
				t.Fatalf("FormatBytes(%d) = %q", n, s)
			}
			return
		}
		checkRoundTrip(t, n)
	})
}
