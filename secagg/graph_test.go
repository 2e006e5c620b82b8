package secagg

import (
	"fmt"
	"slices"
	"testing"
)

// TestHararyGraph checks that the sparse graph is k-regular, symmetric,
// connected, and agrees with adjacent.
func TestHararyGraph(t *testing.T) {
	for _, c := range []struct{ n, k int }{{4, 2}, {7, 4}, {50, 8}, {301, 20}, {1000, 116}} {
		ids := make([]ClientID, c.n)
		for i := range ids {
			ids[i] = ClientID(3*i + 5) // IDs need not be 1..n
		}
		g := newGraph(ids, c.k)
		nb := make([]map[ClientID]bool, c.n)
		for i := range ids {
			l := g.neighbors(i)
			if len(l) != c.k || !slices.IsSorted(l) || slices.Contains(l, ids[i]) {
				t.Fatalf("n=%d k=%d: client %d has neighbours %v", c.n, c.k, ids[i], l)
			}
			nb[i] = map[ClientID]bool{}
			for _, v := range l {
				nb[i][v] = true
			}
			if len(nb[i]) != c.k {
				t.Fatalf("n=%d k=%d: repeated neighbour of %d", c.n, c.k, ids[i])
			}
		}
		for i := range ids {
			for j := range ids {
				if nb[i][ids[j]] != nb[j][ids[i]] || nb[i][ids[j]] != g.adjacent(i, j) {
					t.Fatalf("n=%d k=%d: asymmetric or inconsistent between %d and %d", c.n, c.k, ids[i], ids[j])
				}
			}
		}
		// Connected: a search from index 0 reaches everyone.
		seen := map[ClientID]bool{ids[0]: true}
		queue := []int{0}
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			for _, v := range g.neighbors(i) {
				if !seen[v] {
					seen[v] = true
					queue = append(queue, g.index[v])
				}
			}
		}
		if len(seen) != c.n {
			t.Fatalf("n=%d k=%d: graph not connected", c.n, c.k)
		}
	}
}

// TestGraphRandomPlacement checks that two instances over the same clients
// draw different graphs (equal ones would mean a predictable placement; the
// chance for n = 60, k = 6 is about 60!/(2·60) ≈ 0).
func TestGraphRandomPlacement(t *testing.T) {
	ids := make([]ClientID, 60)
	for i := range ids {
		ids[i] = ClientID(i + 1)
	}
	a, b := newGraph(ids, 6), newGraph(ids, 6)
	if fmt.Sprint(a.neighbors(0), a.neighbors(1), a.neighbors(2)) == fmt.Sprint(b.neighbors(0), b.neighbors(1), b.neighbors(2)) {
		t.Fatal("two instances drew the same neighbourhoods")
	}
	// Nor is the ring the clients' ID order.
	identity := 0
	for i := range ids {
		var want []ClientID
		for off := 1; off <= 3; off++ {
			want = append(want, ids[(i+off)%60], ids[(i-off+60)%60])
		}
		slices.Sort(want)
		if slices.Equal(a.neighbors(i), want) {
			identity++
		}
	}
	if identity == len(ids) {
		t.Fatal("the ring follows the ID order")
	}
}

func TestCompleteGraph(t *testing.T) {
	ids := []ClientID{2, 4, 9, 10}
	g := newGraph(ids, 3)
	if got := g.neighbors(1); !slices.Equal(got, []ClientID{2, 9, 10}) {
		t.Fatalf("complete graph neighbours of 4: %v", got)
	}
}
