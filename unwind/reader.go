package unwind

import (
	"encoding/binary"
	"fmt"
)

// reader is a cursor over a byte slice whose every read is checked: a
// short or overlong value sets err and returns 0, and all later reads
// return 0 too, so a parser can read a whole record and check err once.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at offset %#x: %w", what, r.off, ErrMalformed)
	}
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > r.left() {
		r.fail(fmt.Sprintf("%d-byte read past the end (%d left)", n, r.left()))
		return false
	}
	return true
}

func (r *reader) u8() uint8 {
	if !r.need(1) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if n > uint64(r.left()) {
		r.fail(fmt.Sprintf("%d-byte block past the end (%d left)", n, r.left()))
		return nil
	}
	if !r.need(int(n)) {
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}

// uleb reads an unsigned LEB128. More than 10 bytes, or bits beyond 64,
// is an error rather than a silent wrap: a crafted offset must not turn
// into a plausible small one.
func (r *reader) uleb() uint64 {
	var v uint64
	for i := 0; ; i++ {
		if !r.need(1) {
			return 0
		}
		c := r.b[r.off]
		r.off++
		if i == 9 && c > 1 {
			r.fail("ULEB128 overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
		if i == 9 {
			r.fail("ULEB128 longer than 10 bytes")
			return 0
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	for i := 0; ; i++ {
		if !r.need(1) {
			return 0
		}
		c := r.b[r.off]
		r.off++
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
		if i == 9 {
			r.fail("SLEB128 longer than 10 bytes")
			return 0
		}
	}
}

// cstring reads a NUL-terminated string of at most max bytes.
func (r *reader) cstring(max int) string {
	if r.err != nil {
		return ""
	}
	for i := r.off; i < len(r.b) && i-r.off <= max; i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.off:i])
			r.off = i + 1
			return s
		}
	}
	r.fail("unterminated or overlong string")
	return ""
}

// Pointer encodings (DW_EH_PE_*), as used by .eh_frame and .eh_frame_hdr.
const (
	peAbsptr  = 0x00
	peULEB128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSLEB128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c

	pePCRel   = 0x10
	peTextRel = 0x20
	peDataRel = 0x30
	peFuncRel = 0x40
	peAligned = 0x50

	peIndirect = 0x80
	peOmit     = 0xff
)

// ptrBases are the addresses the relative pointer encodings are relative
// to. secAddr is the virtual address of the section's first byte, so the
// address of the value being read is secAddr + offset.
type ptrBases struct {
	secAddr  uint64
	dataRel  uint64
	textRel  uint64
	funcRel  uint64
	haveData bool
	haveText bool
}

// validEncoding reports whether enc is a pointer encoding we can decode
// without reading process memory (indirect pointers need the GOT's
// contents, which only matter for personality routines we skip).
func validEncoding(enc byte, allowIndirect bool) bool {
	if enc == peOmit {
		return true
	}
	if enc&peIndirect != 0 && !allowIndirect {
		return false
	}
	switch enc & 0x0f {
	case peAbsptr, peULEB128, peUdata2, peUdata4, peUdata8, peSLEB128, peSdata2, peSdata4, peSdata8:
	default:
		return false
	}
	switch enc & 0x70 {
	case 0, pePCRel, peTextRel, peDataRel, peFuncRel, peAligned:
	default:
		return false
	}
	return true
}

// encoded reads one pointer in encoding enc. The value is wrapping
// uint64 arithmetic, as the linker computed it; callers range-check the
// result against the file's segments.
func (r *reader) encoded(enc byte, b *ptrBases) uint64 {
	if r.err != nil {
		return 0
	}
	if enc == peOmit {
		return 0
	}
	if !validEncoding(enc, true) {
		r.fail(fmt.Sprintf("unknown pointer encoding %#x", enc))
		return 0
	}
	if enc&0x70 == peAligned {
		// Aligned values start at the next 8-byte boundary of the address.
		pad := int((8 - (b.secAddr+uint64(r.off))%8) % 8)
		if !r.need(pad) {
			return 0
		}
		r.off += pad
	}
	at := b.secAddr + uint64(r.off)
	var v uint64
	switch enc & 0x0f {
	case peAbsptr, peUdata8:
		v = r.u64()
	case peULEB128:
		v = r.uleb()
	case peUdata2:
		v = uint64(r.u16())
	case peUdata4:
		v = uint64(r.u32())
	case peSLEB128:
		v = uint64(r.sleb())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	case peSdata8:
		v = r.u64()
	}
	switch enc & 0x70 {
	case pePCRel:
		v += at
	case peDataRel:
		if !b.haveData {
			r.fail("data-relative pointer without a data base")
			return 0
		}
		v += b.dataRel
	case peTextRel:
		if !b.haveText {
			r.fail("text-relative pointer without a text base")
			return 0
		}
		v += b.textRel
	case peFuncRel:
		v += b.funcRel
	}
	// Indirect pointers point at the real value; nothing we need (FDE
	// ranges) is ever indirect, so the address itself is returned and the
	// caller must not use it as a code address.
	return v
}
