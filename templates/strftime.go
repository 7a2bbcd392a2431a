package templates

import (
	"strconv"
	"strings"
	"time"
)

// strftime is Python's datetime.strftime for a naive datetime on Linux
// (glibc, C locale): %z and %Z are empty, %f is microseconds, and glibc's
// flags (-, _, 0, ^, #) and field widths apply.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		var flag byte
		for i < len(format) && strings.IndexByte("-_0^#", format[i]) >= 0 {
			flag = format[i]
			i++
		}
		width := -1
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			if width < 0 {
				width = 0
			}
			width = width*10 + int(format[i]-'0')
			i++
		}
		for i < len(format) && (format[i] == 'E' || format[i] == 'O') {
			i++
		}
		if i >= len(format) {
			b.WriteString(format[start:])
			break
		}
		s, ok := strftimeField(t, format[i], flag, width)
		if !ok {
			b.WriteString(format[start : i+1])
			continue
		}
		b.WriteString(s)
	}
	return b.String()
}

func strftimeField(t time.Time, c byte, flag byte, width int) (string, bool) {
	num := func(n, w int, padc byte) string {
		if flag == '-' {
			return strconv.Itoa(n)
		}
		if flag == '_' {
			padc = ' '
		} else if flag == '0' {
			padc = '0'
		}
		if width >= 0 {
			w = width
		}
		s := strconv.Itoa(n)
		neg := n < 0
		if neg {
			s = s[1:]
		}
		for len(s) < w-boolInt(neg) {
			s = string(padc) + s
		}
		if neg {
			s = "-" + s
		}
		return s
	}
	text := func(s string) string {
		switch flag {
		case '^':
			s = strings.ToUpper(s)
		case '#':
			s = swapCaseASCII(s)
		}
		if width > len(s) {
			padc := " "
			if flag == '0' {
				padc = "0"
			}
			s = repeatStr(padc, width-len(s)) + s
		}
		return s
	}
	hour12 := t.Hour() % 12
	if hour12 == 0 {
		hour12 = 12
	}
	isoYear, isoWeek := t.ISOWeek()
	switch c {
	case 'a':
		return text(t.Weekday().String()[:3]), true
	case 'A':
		return text(t.Weekday().String()), true
	case 'b', 'h':
		return text(t.Month().String()[:3]), true
	case 'B':
		return text(t.Month().String()), true
	case 'c':
		return text(strftime(t, "%a %b %e %H:%M:%S %Y")), true
	case 'C':
		return num(t.Year()/100, 2, '0'), true
	case 'd':
		return num(t.Day(), 2, '0'), true
	case 'D':
		return text(strftime(t, "%m/%d/%y")), true
	case 'e':
		return num(t.Day(), 2, ' '), true
	case 'f':
		return num(t.Nanosecond()/1000, 6, '0'), true
	case 'F':
		return text(strftime(t, "%Y-%m-%d")), true
	case 'g':
		return num(isoYear%100, 2, '0'), true
	case 'G':
		return num(isoYear, 1, '0'), true
	case 'H':
		return num(t.Hour(), 2, '0'), true
	case 'I':
		return num(hour12, 2, '0'), true
	case 'j':
		return num(t.YearDay(), 3, '0'), true
	case 'k':
		return num(t.Hour(), 2, ' '), true
	case 'l':
		return num(hour12, 2, ' '), true
	case 'm':
		return num(int(t.Month()), 2, '0'), true
	case 'M':
		return num(t.Minute(), 2, '0'), true
	case 'n':
		return "\n", true
	case 'p':
		if t.Hour() < 12 {
			return text("AM"), true
		}
		return text("PM"), true
	case 'P':
		if t.Hour() < 12 {
			return text("am"), true
		}
		return text("pm"), true
	case 'r':
		return text(strftime(t, "%I:%M:%S %p")), true
	case 'R':
		return text(strftime(t, "%H:%M")), true
	case 's':
		naive := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.Local)
		return num(int(naive.Unix()), 1, '0'), true
	case 'S':
		return num(t.Second(), 2, '0'), true
	case 't':
		return "\t", true
	case 'T':
		return text(strftime(t, "%H:%M:%S")), true
	case 'u':
		wd := int(t.Weekday())
		if wd == 0 {
			wd = 7
		}
		return num(wd, 1, '0'), true
	case 'U':
		return num((t.YearDay()+6-int(t.Weekday()))/7, 2, '0'), true
	case 'V':
		return num(isoWeek, 2, '0'), true
	case 'w':
		return num(int(t.Weekday()), 1, '0'), true
	case 'W':
		return num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0'), true
	case 'x':
		return text(strftime(t, "%m/%d/%y")), true
	case 'X':
		return text(strftime(t, "%H:%M:%S")), true
	case 'y':
		return num(t.Year()%100, 2, '0'), true
	case 'Y':
		return num(t.Year(), 1, '0'), true
	case 'z', 'Z':
		return "", true // naive datetime
	case '%':
		return "%", true
	}
	return "", false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func swapCaseASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 32
		case c >= 'A' && c <= 'Z':
			b[i] = c + 32
		}
	}
	return string(b)
}
