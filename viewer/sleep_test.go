package viewer

import "time"

func timeSleep() { time.Sleep(10 * time.Millisecond) }
