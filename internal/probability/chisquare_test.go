package probability

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reference values of the χ² survival function (R: pchisq(x, k, lower=FALSE)).
func TestChiSquareSurvival(t *testing.T) {
	for _, c := range []struct {
		x    float64
		k    int
		want float64
	}{
		{3.841458820694124, 1, 0.05},
		{5.991464547107979, 2, 0.05},
		{7.814727903251178, 3, 0.05},
		{9.487729036781154, 4, 0.05},
		{18.46682695290317, 4, 0.001},
		{11.07049769351635, 5, 0.05},
		{1, 4, 0.9097959895689501},
	} {
		assert.InDelta(t, c.want, chiSquareSurvival(c.x, c.k), 1e-12, "x=%v k=%d", c.x, c.k)
	}
}

func TestChiSquare(t *testing.T) {
	stat, p, err := ChiSquare([]int{25, 25, 25, 25}, []float64{0.25, 0.25, 0.25, 0.25})
	require.NoError(t, err)
	assert.Equal(t, 0.0, stat)
	assert.Equal(t, 1.0, p)
	stat, p, err = ChiSquare([]int{40, 20, 20, 20}, []float64{0.25, 0.25, 0.25, 0.25})
	require.NoError(t, err)
	assert.InDelta(t, 12.0, stat, 1e-12)
	assert.InDelta(t, 0.007383160, p, 1e-9)
	_, _, err = ChiSquare([]int{1}, []float64{1})
	assert.Error(t, err)
}
