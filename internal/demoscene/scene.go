package demoscene

// RGB is an 8-bit colour.
type RGB struct{ R, G, B uint8 }

// Palette holds the background colours, in class-index order. Every colour
// has a channel of at most 128 so that the white square (all channels 255)
// is separable by its darkest channel.
var Palette = [8]RGB{
	{200, 30, 30},  // red
	{30, 170, 40},  // green
	{30, 60, 200},  // blue
	{220, 200, 30}, // yellow
	{30, 190, 200}, // cyan
	{190, 40, 180}, // magenta
	{230, 120, 20}, // orange
	{90, 90, 90},   // grey
}

// Labels names the palette entries.
var Labels = [8]string{"red", "green", "blue", "yellow", "cyan", "magenta", "orange", "grey"}

// SquareColor is the colour of the moving square.
var SquareColor = RGB{255, 255, 255}
