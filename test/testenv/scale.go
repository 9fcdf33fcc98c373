package testenv

import "os"

// Full tells whether the tests run at full size (TEST_FULL=1, `make test-full`): a long scenario
// repeats its steps fewer times in `make test`, which must stay within its time budget
// (docs/development.md), and as many as it was written for here.
func Full() bool { return os.Getenv("TEST_FULL") == "1" }

// Scale is full under TEST_FULL=1, else bounded: how many times a long scenario repeats a step.
func Scale(full, bounded int) int {
	if Full() {
		return full
	}
	return bounded
}
