// gen.c writes the libjpeg-encoded test images of package jpeg (committed,
// so the tests need no C compiler): a smooth gradient with shapes, 131x77
// (not a multiple of any MCU size), quality 90, in
//   s420.jpg s422.jpg s444.jpg grey.jpg  chroma subsampling / greyscale
//   rst420.jpg                           4:2:0 with a restart marker every MCU row
//   cmyk.jpg                             four components, Adobe CMYK (JCS_CMYK)
//   arith420.jpg                         4:2:0, arithmetic-coded (SOF9)
//   prog420.jpg                          4:2:0, progressive (SOF2)
// cmyk.jpg and arith420.jpg are what one CPU decoder decodes and the other
// refuses (image/jpeg: CMYK yes, arithmetic no; libjpeg-turbo: the
// reverse), so package jpeg refuses both on every backend.
// Regenerate: gcc -O2 -o /tmp/gen gen.c -ljpeg && /tmp/gen
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

enum { W = 131, H = 77 };

static unsigned char px[W * H * 3];

static void draw(void) {
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++) {
			unsigned char* p = &px[3 * (y * W + x)];
			p[0] = (unsigned char)(40 + 180 * x / W);
			p[1] = (unsigned char)(30 + 200 * y / H);
			p[2] = (unsigned char)(200 - 150 * (x + y) / (W + H));
			int dx = x - 40, dy = y - 35;
			if (dx * dx + dy * dy < 400) { p[0] = 230; p[1] = 40; p[2] = 50; }
			if (x > 80 && x < 115 && y > 15 && y < 60) { p[0] = 250; p[1] = 250; p[2] = 245; }
		}
}

enum { PLAIN = 0, ARITH = 1, PROG = 2 };

static void write(const char* name, int comps, int h0, int v0, int rst, int mode) {
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	FILE* f = fopen(name, "wb");
	if (!f) { perror(name); exit(1); }
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	jpeg_stdio_dest(&c, f);
	c.image_width = W;
	c.image_height = H;
	c.input_components = comps;
	c.in_color_space = comps == 4 ? JCS_CMYK : comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
	jpeg_set_defaults(&c);
	c.arith_code = mode == ARITH;
	if (mode == PROG) jpeg_simple_progression(&c);
	jpeg_set_quality(&c, 90, TRUE);
	if (comps == 3) {
		c.comp_info[0].h_samp_factor = h0;
		c.comp_info[0].v_samp_factor = v0;
	}
	c.restart_in_rows = rst;
	jpeg_start_compress(&c, TRUE);
	unsigned char grey[W], cmyk[4 * W];
	while (c.next_scanline < H) {
		unsigned char* row = &px[3 * W * c.next_scanline];
		if (comps == 4) {
			for (int x = 0; x < W; x++) {
				cmyk[4 * x] = 255 - row[3 * x];
				cmyk[4 * x + 1] = 255 - row[3 * x + 1];
				cmyk[4 * x + 2] = 255 - row[3 * x + 2];
				cmyk[4 * x + 3] = 0;
			}
			row = cmyk;
		} else if (comps == 1) {
			for (int x = 0; x < W; x++)
				grey[x] = (unsigned char)((77 * row[3 * x] + 150 * row[3 * x + 1] + 29 * row[3 * x + 2] + 128) >> 8);
			row = grey;
		}
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	fclose(f);
}

int main(void) {
	draw();
	write("s420.jpg", 3, 2, 2, 0, PLAIN);
	write("s422.jpg", 3, 2, 1, 0, PLAIN);
	write("s444.jpg", 3, 1, 1, 0, PLAIN);
	write("grey.jpg", 1, 1, 1, 0, PLAIN);
	write("rst420.jpg", 3, 2, 2, 1, PLAIN);
	write("cmyk.jpg", 4, 1, 1, 0, PLAIN);
	write("arith420.jpg", 3, 2, 2, 0, ARITH);
	write("prog420.jpg", 3, 2, 2, 0, PROG);
	return 0;
}
