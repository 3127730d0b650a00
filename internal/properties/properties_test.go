package properties

import (
	"reflect"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	in := "# comment\n! also\n\nnode.id=1\n  log.dirs : /var/x  \nflag\nempty=\nurl=a=b\n"
	got, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Line{{"node.id", "1", 4}, {"log.dirs", "/var/x", 5}, {"flag", "", 6}, {"empty", "", 7}, {"url", "a=b", 8}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
