package jetstream

// PutSessionSet is putSessionSet, for the tests of package jetstream_test
// (which can start servers through natstest).
var PutSessionSet = putSessionSet

// Marshaled is the set's stored form.
func (s *SessionSet) Marshaled() []byte { return s.marshal() }
