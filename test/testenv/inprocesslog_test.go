/*
Copyright 2026 The cluster-api-provider-harvester Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package testenv

import (
	"fmt"
	"testing"
)

func TestTheInProcessLogKeepsItsLastLinesAndFindsThemByWords(t *testing.T) {
	r := &lineRing{max: 3}
	_, _ = r.Write([]byte(`{"msg":"Reconciler error","namespace":"a","name":"x"}` + "\n" + `{"msg":"Reconciler err`))
	_, _ = r.Write([]byte(`or","namespace":"b","name":"y"}` + "\n"))
	if got := r.matching(5, `"namespace":"b"`); len(got) != 1 || got[0] != `{"msg":"Reconciler error","namespace":"b","name":"y"}` {
		t.Fatalf("a line written in two parts is one line: %q", got)
	}
	for i := range 5 {
		_, _ = fmt.Fprintf(r, "line %d\n", i)
	}
	if got := r.matching(10, "line"); fmt.Sprint(got) != "[line 2 line 3 line 4]" {
		t.Fatalf("the last 3 lines, oldest first: %q", got)
	}
	if got := r.matching(2, "line"); fmt.Sprint(got) != "[line 3 line 4]" {
		t.Fatalf("the last 2 matching lines, oldest first: %q", got)
	}
	mark := r.mark()
	_, _ = fmt.Fprintf(r, "line 5\n")
	if got := r.since(mark, 10); fmt.Sprint(got) != "[line 5]" {
		t.Fatalf("only the line written after the mark: %q", got)
	}
	if got := r.since(0, 10); fmt.Sprint(got) != "[line 3 line 4 line 5]" {
		t.Fatalf("a mark older than the lines kept gives all of them: %q", got)
	}
	if got := r.matching(2, "line", "9"); len(got) != 0 {
		t.Fatalf("no line has both words: %q", got)
	}
}
