package intent

import (
	"fmt"
	"reflect"
)

// Full returns an intent with every field set to a non-zero value that
// differs from its zero value, so that a round trip through an encoder
// that forgets a field (a new one, say) fails. It panics on a field kind
// it does not know, which is the prompt to teach it the new field's kind.
// Tests of every wire form of an intent use it.
func Full() Intent {
	var in Intent
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch t := f.Type(); {
		case t == reflect.TypeFor[*bool]():
			b := i%2 == 0
			f.Set(reflect.ValueOf(&b))
		case t.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("field_%d", i))
		case t == reflect.TypeFor[[]string]():
			f.Set(reflect.ValueOf([]string{fmt.Sprintf("tool_%d", i), fmt.Sprintf("other_%d", i)}))
		default:
			panic(fmt.Sprintf("intent.Full: field %s has kind %s; teach Full (and every encoder of an intent) about it", v.Type().Field(i).Name, t))
		}
	}
	return in
}
