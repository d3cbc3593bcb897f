// Package batchtest has what tests of batching use: a manual Clock whose
// time moves only when the test says so.
package batchtest
