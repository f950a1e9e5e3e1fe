package service

// MarksLen is the number of sessions the engine holds a read floor for
// (the marks are bounded).
func MarksLen(e *Engine) int { return e.marks.len() }
