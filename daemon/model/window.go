package model

import "time"

// ChangeWindowStatus is stackd's own part of a stack's status while a
// change of it waits for a change window.
type ChangeWindowStatus struct {
	// Change is what waits: commit, drift or destroy.
	Change string `json:"change"`
	// NextOpen is when the windows next let it run; zero when no window
	// opens within a year.
	NextOpen time.Time `json:"nextOpen,omitzero"`
	// Windows name the windows that hold it back.
	Windows []string `json:"windows"`
}

// WindowOverride lets a stack's next update run whatever the change
// windows say: who asked, why, and when. The update that runs records
// it, and consumes it.
type WindowOverride struct {
	By     Principal `json:"by"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}
