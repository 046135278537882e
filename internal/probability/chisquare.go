package probability

import (
	"errors"
	"math"
)

// ChiSquare runs Pearson's goodness-of-fit test of observed counts against
// expected probabilities (which should sum to 1) and returns the statistic
// and its p-value with len(observed)−1 degrees of freedom. Categories with
// zero expected probability must have zero counts (else p = 0).
func ChiSquare(observed []int, expected []float64) (stat, p float64, err error) {
	if len(observed) != len(expected) || len(observed) < 2 {
		return 0, 0, errors.New("probability: ChiSquare needs as many expected probabilities as counts, at least 2")
	}
	total := 0
	for _, o := range observed {
		total += o
	}
	df := -1
	for i, o := range observed {
		e := expected[i] * float64(total)
		if e == 0 {
			if o != 0 {
				return math.Inf(1), 0, nil
			}
			continue
		}
		df++
		d := float64(o) - e
		stat += d * d / e
	}
	if df < 1 {
		return 0, 1, nil
	}
	return stat, chiSquareSurvival(stat, df), nil
}

// chiSquareSurvival is P(X ≥ x) for X ~ χ²(k): the regularized upper
// incomplete gamma function Q(k/2, x/2), by its finite sums for integer
// and half-integer shapes.
func chiSquareSurvival(x float64, k int) float64 {
	if x <= 0 {
		return 1
	}
	y := x / 2
	if k%2 == 0 {
		// Q(m, y) = e^-y Σ_{j<m} y^j/j!
		term, sum := 1.0, 1.0
		for j := 1; j < k/2; j++ {
			term *= y / float64(j)
			sum += term
		}
		return math.Exp(-y) * sum
	}
	// Q(m+1/2, y) = erfc(√y) + e^-y Σ_{j=1..m} y^(j-1/2)/Γ(j+1/2)
	q := math.Erfc(math.Sqrt(y))
	term := math.Sqrt(y) / math.Gamma(1.5)
	for j := 1; j <= k/2; j++ {
		q += math.Exp(-y) * term
		term *= y / (float64(j) + 0.5)
	}
	return q
}
