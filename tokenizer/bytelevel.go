package tokenizer

// The GPT-2 byte-to-character table: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100 and up, in order. runeToByte is
// its inverse over U+0000..U+0143 (-1 where a rune is not in the table).
var byteToRune, runeToByte = func() ([256]rune, [0x144]int16) {
	var tab [256]rune
	var inv [0x144]int16
	for i := range inv {
		inv[i] = -1
	}
	n := rune(0)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			tab[b] = rune(b)
		} else {
			tab[b] = 256 + n
			n++
		}
		inv[tab[b]] = int16(b)
	}
	return tab, inv
}()

// byteLevelDecode converts a token's ByteLevel characters back to bytes,
// appending to dst. A token with any character outside the table (an added
// token such as "<｜begin▁of▁sentence｜>") contributes its raw UTF-8, as the
// Rust decoder does.
func byteLevelDecode(dst []byte, tok string) []byte {
	n := len(dst)
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return append(dst[:n], tok...)
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst
}
