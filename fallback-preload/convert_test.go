package preload

import (
	"testing"
	"time"
)

// The converter keeps which stream serials it has read, so that a pass
// knows whether a serial below its start's count has not come yet (the
// watermark then holds to the slack). The serials come in any order;
// one that never comes (a failed fork's) is given up only once many
// later ones came and a while has passed, so that the set stays bounded.
func TestSeenSerials(t *testing.T) {
	c := &converter{seenBelow: 1, seenAbove: map[uint32]struct{}{}}
	for _, id := range []uint32{1, 3, 5, 3, 1} {
		c.saw(id)
	}
	if c.seenBelow != 2 || len(c.seenAbove) != 2 {
		t.Fatalf("after 1, 3, 5: below %d, above %v; want 2, {3, 5}", c.seenBelow, c.seenAbove)
	}
	c.saw(2)
	c.saw(4)
	if c.seenBelow != 6 || len(c.seenAbove) != 0 {
		t.Fatalf("after 1-5: below %d, above %v; want 6, {}", c.seenBelow, c.seenAbove)
	}
	// A hole at 6, with more than maxHoles later serials.
	for id := uint32(7); id < 7+maxHoles+10; id++ {
		c.saw(id)
	}
	now := uint64(time.Hour)
	c.pruneHoles(now)
	c.pruneHoles(now + uint64(holeLife) - 1)
	if c.seenBelow != 6 {
		t.Fatalf("the hole was given up before holeLife: below %d", c.seenBelow)
	}
	c.pruneHoles(now + uint64(holeLife))
	if want := uint32(7 + maxHoles + 10); c.seenBelow != want || len(c.seenAbove) != 0 {
		t.Fatalf("after holeLife: below %d, %d above; want %d, 0", c.seenBelow, len(c.seenAbove), want)
	}
}
