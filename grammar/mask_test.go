package grammar

import "testing"

// wellFormed is Unicode's table of well-formed UTF-8 byte sequences (The
// Unicode Standard, Table 3-7): for a lead byte, the sequence length and
// the range of the second byte (later bytes are 80..BF).
func wellFormed(lead byte) (n int, lo, hi byte) {
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		return 2, 0x80, 0xBF
	case lead == 0xE0:
		return 3, 0xA0, 0xBF
	case lead >= 0xE1 && lead <= 0xEC, lead == 0xEE, lead == 0xEF:
		return 3, 0x80, 0xBF
	case lead == 0xED:
		return 3, 0x80, 0x9F
	case lead == 0xF0:
		return 4, 0x90, 0xBF
	case lead >= 0xF1 && lead <= 0xF3:
		return 4, 0x80, 0xBF
	case lead == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// TestValidStart: validStart agrees with Table 3-7 on every sequence of one
// and two bytes and on every three-byte sequence of a four-byte lead.
func TestValidStart(t *testing.T) {
	ref := func(bs []byte) bool {
		n, lo, hi := wellFormed(bs[0])
		if n == 0 || len(bs) >= n {
			return false
		}
		for i := 1; i < len(bs); i++ {
			if i == 1 && (bs[i] < lo || bs[i] > hi) || bs[i] < 0x80 || bs[i] > 0xBF {
				return false
			}
		}
		return true
	}
	check := func(bs []byte) {
		if got, want := validStart(bs), ref(bs); got != want {
			t.Fatalf("validStart(% x) = %v, want %v", bs, got, want)
		}
	}
	for a := range 256 {
		check([]byte{byte(a)})
		for b := range 256 {
			check([]byte{byte(a), byte(b)})
		}
	}
	for a := 0xF0; a <= 0xF4; a++ {
		for b := range 256 {
			for c := range 256 {
				check([]byte{byte(a), byte(b), byte(c)})
			}
		}
	}
}
