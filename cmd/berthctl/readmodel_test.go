package main

import "testing"

func TestFlexString_AcceptsAStringOrANumber(t *testing.T) {
	for in, want := range map[string]string{`"32768"`: "32768", `32768`: "32768"} {
		var s flexString
		if err := s.UnmarshalJSON([]byte(in)); err != nil || string(s) != want {
			t.Fatalf("%s: %q %v", in, s, err)
		}
	}
	var s flexString
	if err := s.UnmarshalJSON([]byte(`{}`)); err == nil {
		t.Fatal("an object is not a port")
	}
}
