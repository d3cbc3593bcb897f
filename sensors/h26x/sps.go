package h26x

import (
	"fmt"
)

// MaxDimension bounds the width and height a parameter set may declare;
// larger ones are malformed for edged (H.264 level 6.2 and H.265 level 6.2
// top out at 8192x4320). It keeps every size computed from an SPS small.
const MaxDimension = 16384

// SPS is what edged reads from a sequence parameter set.
type SPS struct {
	Codec Codec
	ID    int
	// Width and Height are the picture's size after the SPS's cropping
	// (H.264 frame_cropping, H.265 conformance window): what a decoder
	// outputs. CodedWidth and CodedHeight are the size before cropping.
	Width, Height           int
	CodedWidth, CodedHeight int
	// Profile is profile_idc; Level is level_idc (H.264: 10 × the level,
	// 31 for 3.1; H.265: 30 × the level, 93 for 3.1).
	Profile, Level int
	// Constraints is H.264's constraint_set flags byte (set1 on Baseline
	// means Constrained Baseline); 0 for H.265.
	Constraints int
	// ChromaFormat is chroma_format_idc: 0 monochrome, 1 4:2:0, 2 4:2:2,
	// 3 4:4:4.
	ChromaFormat       int
	BitDepth           int // luma bits per sample
	BitDepthChroma     int
	Interlaced         bool // H.264 frame_mbs_only_flag = 0 (fields)
	FullRange          bool // VUI video_full_range_flag
	MatrixCoefficients int  // VUI matrix_coefficients; 2 (unspecified) without one
	// FPS is the VUI's timing (H.264 time_scale / 2·num_units_in_tick,
	// H.265 time_scale / num_units_in_tick); 0 when the SPS has none.
	FPS float64
}

// ProfileName names the profile ("High", "Main 10", ...).
func (s SPS) ProfileName() string {
	if s.Codec == H265 {
		switch s.Profile {
		case 1:
			return "Main"
		case 2:
			return "Main 10"
		case 3:
			return "Main Still Picture"
		case 4:
			return "Range Extensions"
		}
		return fmt.Sprintf("profile %d", s.Profile)
	}
	switch s.Profile {
	case 66:
		if s.Constraints&0x40 != 0 {
			return "Constrained Baseline"
		}
		return "Baseline"
	case 77:
		return "Main"
	case 88:
		return "Extended"
	case 100:
		return "High"
	case 110:
		return "High 10"
	case 122:
		return "High 4:2:2"
	case 244:
		return "High 4:4:4 Predictive"
	case 44:
		return "CAVLC 4:4:4 Intra"
	}
	return fmt.Sprintf("profile %d", s.Profile)
}

// LevelName is the level as written ("4.1").
func (s SPS) LevelName() string {
	if s.Codec == H265 {
		l := s.Level / 3
		return fmt.Sprintf("%d.%d", l/10, l%10)
	}
	if s.Level == 9 {
		return "1b"
	}
	return fmt.Sprintf("%d.%d", s.Level/10, s.Level%10)
}

func (s SPS) String() string {
	str := fmt.Sprintf("%s %s@%s %dx%d", s.Codec, s.ProfileName(), s.LevelName(), s.Width, s.Height)
	if s.BitDepth != 8 {
		str += fmt.Sprintf(" %d-bit", s.BitDepth)
	}
	if s.ChromaFormat != 1 {
		str += fmt.Sprintf(" chroma_format_idc=%d", s.ChromaFormat)
	}
	if s.FPS > 0 {
		str += fmt.Sprintf(" %.4gfps", s.FPS)
	}
	return str
}

// ParseSPS parses a sequence parameter set NAL unit of codec c (its header
// first, no start code). It allocates nothing.
func ParseSPS(c Codec, nal []byte) (SPS, error) {
	switch c {
	case H264:
		return parseSPS264(nal)
	case H265:
		return parseSPS265(nal)
	}
	return SPS{}, fmt.Errorf("%w: codec %s", ErrUnsupported, c)
}

// malformed is the error of a parameter set that does not parse.
func malformed(c Codec, what string) error {
	return fmt.Errorf("%w: %s %s", ErrMalformed, c, what)
}

// cropped applies a crop of (l+r)·ux horizontally and (t+b)·uy vertically,
// refusing one that leaves nothing.
func cropped(s *SPS, l, r, t, b uint32, ux, uy int) bool {
	cw := (int64(l) + int64(r)) * int64(ux)
	ch := (int64(t) + int64(b)) * int64(uy)
	if cw >= int64(s.CodedWidth) || ch >= int64(s.CodedHeight) {
		return false
	}
	s.Width, s.Height = s.CodedWidth-int(cw), s.CodedHeight-int(ch)
	return true
}

func parseSPS264(nal []byte) (SPS, error) {
	s := SPS{Codec: H264, MatrixCoefficients: 2}
	if H264.NALType(nal) != nal264SPS {
		return s, malformed(H264, "SPS: not an SPS NAL unit")
	}
	r := newBitReader(nal[1:])
	s.Profile = int(r.u(8))
	s.Constraints = int(r.u(8))
	s.Level = int(r.u(8))
	s.ID = int(r.ueMax(31))
	s.ChromaFormat, s.BitDepth, s.BitDepthChroma = 1, 8, 8
	separate := false
	switch s.Profile {
	case 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
		s.ChromaFormat = int(r.ueMax(3))
		if s.ChromaFormat == 3 {
			separate = r.flag()
		}
		s.BitDepth = 8 + int(r.ueMax(6))
		s.BitDepthChroma = 8 + int(r.ueMax(6))
		r.skip(1)     // qpprime_y_zero_transform_bypass_flag
		if r.flag() { // seq_scaling_matrix_present_flag
			n := 8
			if s.ChromaFormat == 3 {
				n = 12
			}
			for i := 0; i < n && !r.err; i++ {
				if r.flag() {
					size := 16
					if i >= 6 {
						size = 64
					}
					skipScalingList264(&r, size)
				}
			}
		}
	}
	r.ueMax(12)         // log2_max_frame_num_minus4
	switch r.ueMax(2) { // pic_order_cnt_type
	case 0:
		r.ueMax(12) // log2_max_pic_order_cnt_lsb_minus4
	case 1:
		r.skip(1) // delta_pic_order_always_zero_flag
		r.se()    // offset_for_non_ref_pic
		r.se()    // offset_for_top_to_bottom_field
		n := r.ueMax(255)
		for i := uint32(0); i < n && !r.err; i++ {
			r.se() // offset_for_ref_frame
		}
	}
	r.ue()    // max_num_ref_frames
	r.skip(1) // gaps_in_frame_num_value_allowed_flag
	wmbs := r.ueMax(MaxDimension/16-1) + 1
	hmaps := r.ueMax(MaxDimension/16-1) + 1
	frameMBsOnly := r.flag()
	if !frameMBsOnly {
		r.skip(1) // mb_adaptive_frame_field_flag
	}
	s.Interlaced = !frameMBsOnly
	r.skip(1) // direct_8x8_inference_flag
	fieldMul := 1
	if !frameMBsOnly {
		fieldMul = 2
	}
	s.CodedWidth, s.CodedHeight = int(wmbs)*16, int(hmaps)*16*fieldMul
	s.Width, s.Height = s.CodedWidth, s.CodedHeight
	if r.flag() { // frame_cropping_flag
		l, rt, t, b := r.ue(), r.ue(), r.ue(), r.ue()
		ux, uy := 1, fieldMul
		if !separate && s.ChromaFormat != 0 {
			subW, subH := 2, 2
			if s.ChromaFormat == 2 {
				subH = 1
			} else if s.ChromaFormat == 3 {
				subW, subH = 1, 1
			}
			ux, uy = subW, subH*fieldMul
		}
		if !r.err && !cropped(&s, l, rt, t, b, ux, uy) {
			return s, malformed(H264, "SPS: the cropping leaves no picture")
		}
	}
	if r.err {
		return s, malformed(H264, "SPS: truncated before its picture size")
	}
	if s.CodedHeight > MaxDimension {
		return s, malformed(H264, "SPS: height over the limit")
	}
	if r.flag() { // vui_parameters_present_flag
		vui264(&r, &s)
	}
	// A VUI cut short leaves what was read before it; the size is what
	// matters, and it was complete.
	return s, nil
}

func skipScalingList264(r *bitReader, size int) {
	last, next := int32(8), int32(8)
	for j := 0; j < size && !r.err; j++ {
		if next != 0 {
			d := r.se()
			if d < -128 || d > 127 {
				r.err = true
				return
			}
			next = (last + d + 256) % 256
		}
		if next != 0 {
			last = next
		}
	}
}

// vui264 reads the H.264 VUI up to its timing information.
func vui264(r *bitReader, s *SPS) {
	if r.flag() { // aspect_ratio_info_present_flag
		if r.u(8) == 255 {
			r.skip(32) // sar_width, sar_height
		}
	}
	if r.flag() { // overscan_info_present_flag
		r.skip(1)
	}
	if r.flag() { // video_signal_type_present_flag
		r.skip(3)
		full := r.flag()
		matrix := 2
		if r.flag() { // colour_description_present_flag
			r.skip(16)
			matrix = int(r.u(8))
		}
		if r.err {
			return
		}
		s.FullRange, s.MatrixCoefficients = full, matrix
	}
	if r.flag() { // chroma_loc_info_present_flag
		r.ue()
		r.ue()
	}
	if r.flag() { // timing_info_present_flag
		units, scale := r.u(32), r.u(32)
		if !r.err && units > 0 && scale > 0 {
			s.FPS = float64(scale) / float64(2*uint64(units))
		}
	}
}

func parseSPS265(nal []byte) (SPS, error) {
	s := SPS{Codec: H265, MatrixCoefficients: 2}
	if H265.NALType(nal) != nal265SPS {
		return s, malformed(H265, "SPS: not an SPS NAL unit")
	}
	if nal[1]&7 == 0 {
		// H.265 7.4.2.2: nuh_temporal_id_plus1 shall not be 0. (A zero
		// header byte would also let 00 00 03 straddle the header, where
		// decoders disagree on whether it is an emulation prevention byte.)
		return s, malformed(H265, "SPS: nuh_temporal_id_plus1 is 0")
	}
	r := newBitReader(nal[2:])
	r.skip(4) // sps_video_parameter_set_id
	subLayers := r.u(3)
	if subLayers > 6 {
		return s, malformed(H265, "SPS: sps_max_sub_layers_minus1 over 6")
	}
	r.skip(1) // sps_temporal_id_nesting_flag
	s.Profile, s.Level = profileTierLevel(&r, subLayers)
	s.ID = int(r.ueMax(15))
	s.ChromaFormat = int(r.ueMax(3))
	separate := false
	if s.ChromaFormat == 3 {
		separate = r.flag()
	}
	s.CodedWidth = int(r.ueMax(MaxDimension))
	s.CodedHeight = int(r.ueMax(MaxDimension))
	s.Width, s.Height = s.CodedWidth, s.CodedHeight
	if r.flag() { // conformance_window_flag
		l, rt, t, b := r.ue(), r.ue(), r.ue(), r.ue()
		ux, uy := 1, 1
		if !separate {
			switch s.ChromaFormat {
			case 1:
				ux, uy = 2, 2
			case 2:
				ux = 2
			}
		}
		if !r.err && !cropped(&s, l, rt, t, b, ux, uy) {
			return s, malformed(H265, "SPS: the conformance window leaves no picture")
		}
	}
	s.BitDepth = 8 + int(r.ueMax(8))
	s.BitDepthChroma = 8 + int(r.ueMax(8))
	if r.err || s.CodedWidth == 0 || s.CodedHeight == 0 {
		return s, malformed(H265, "SPS: truncated before its picture size")
	}
	vuiFromSPS265(&r, &s, subLayers)
	return s, nil
}

// profileTierLevel reads profile_tier_level(1, maxSubLayersMinus1) and
// returns general_profile_idc and general_level_idc.
func profileTierLevel(r *bitReader, maxSub uint32) (profile, level int) {
	r.skip(3) // general_profile_space, general_tier_flag
	profile = int(r.u(5))
	r.skip(32) // general_profile_compatibility_flag[32]
	r.skip(48) // progressive, interlaced, non_packed, frame_only, 43 + 1 bits
	level = int(r.u(8))
	var prof, lev [8]bool
	for i := uint32(0); i < maxSub; i++ {
		prof[i], lev[i] = r.flag(), r.flag()
	}
	if maxSub > 0 {
		r.skip(uint(2 * (8 - maxSub))) // reserved_zero_2bits
	}
	for i := uint32(0); i < maxSub; i++ {
		if prof[i] {
			r.skip(88)
		}
		if lev[i] {
			r.skip(8)
		}
	}
	return profile, level
}

// vuiFromSPS265 walks the rest of an H.265 SPS to its VUI and reads the
// colour and timing information; a stream that ends early leaves them
// unset.
func vuiFromSPS265(r *bitReader, s *SPS, subLayers uint32) {
	log2POC := r.ueMax(12) + 4
	start := subLayers
	if r.flag() { // sps_sub_layer_ordering_info_present_flag
		start = 0
	}
	for i := start; i <= subLayers && !r.err; i++ {
		r.ue() // sps_max_dec_pic_buffering_minus1
		r.ue() // sps_max_num_reorder_pics
		r.ue() // sps_max_latency_increase_plus1
	}
	for range 6 {
		r.ue() // coding and transform block sizes, hierarchy depths
	}
	if r.flag() && r.flag() { // scaling_list_enabled_flag, sps_scaling_list_data_present_flag
		skipScalingListData265(r)
	}
	r.skip(2)     // amp_enabled_flag, sample_adaptive_offset_enabled_flag
	if r.flag() { // pcm_enabled_flag
		r.skip(8)
		r.ue()
		r.ue()
		r.skip(1)
	}
	n := r.ueMax(64) // num_short_term_ref_pic_sets
	var deltas [65]uint32
	for i := uint32(0); i < n && !r.err; i++ {
		deltas[i] = stRefPicSet(r, i, &deltas)
	}
	if r.flag() { // long_term_ref_pics_present_flag
		lt := r.ueMax(32)
		for i := uint32(0); i < lt && !r.err; i++ {
			r.skip(uint(log2POC) + 1)
		}
	}
	r.skip(2) // sps_temporal_mvp_enabled_flag, strong_intra_smoothing_enabled_flag
	if r.err || !r.flag() {
		return
	}
	// vui_parameters()
	if r.flag() { // aspect_ratio_info_present_flag
		if r.u(8) == 255 {
			r.skip(32)
		}
	}
	if r.flag() { // overscan_info_present_flag
		r.skip(1)
	}
	if r.flag() { // video_signal_type_present_flag
		r.skip(3)
		full := r.flag()
		matrix := 2
		if r.flag() {
			r.skip(16)
			matrix = int(r.u(8))
		}
		if r.err {
			return
		}
		s.FullRange, s.MatrixCoefficients = full, matrix
	}
	if r.flag() { // chroma_loc_info_present_flag
		r.ue()
		r.ue()
	}
	r.skip(3)     // neutral_chroma_indication, field_seq, frame_field_info_present
	if r.flag() { // default_display_window_flag
		r.ue()
		r.ue()
		r.ue()
		r.ue()
	}
	if r.flag() { // vui_timing_info_present_flag
		units, scale := r.u(32), r.u(32)
		if !r.err && units > 0 && scale > 0 {
			s.FPS = float64(scale) / float64(units)
		}
	}
}

func skipScalingListData265(r *bitReader) {
	for size := 0; size < 4; size++ {
		step := 1
		if size == 3 {
			step = 3
		}
		for m := 0; m < 6 && !r.err; m += step {
			if !r.flag() { // scaling_list_pred_mode_flag
				r.ue() // scaling_list_pred_matrix_id_delta
				continue
			}
			coefs := min(64, 1<<(4+2*size))
			if size > 1 {
				r.se() // scaling_list_dc_coef_minus8
			}
			for i := 0; i < coefs && !r.err; i++ {
				r.se() // scaling_list_delta_coef
			}
		}
	}
}

// stRefPicSet reads st_ref_pic_set(idx) of an SPS and returns its
// NumDeltaPocs (counted as FFmpeg's hevc_ps.c does: every entry used or
// with use_delta_flag).
func stRefPicSet(r *bitReader, idx uint32, deltas *[65]uint32) uint32 {
	if idx != 0 && r.flag() { // inter_ref_pic_set_prediction_flag
		r.skip(1) // delta_rps_sign
		r.ue()    // abs_delta_rps_minus1
		ref := deltas[idx-1]
		var k uint32
		for j := uint32(0); j <= ref && !r.err; j++ {
			used := r.flag()
			use := true
			if !used {
				use = r.flag()
			}
			if used || use {
				k++
			}
		}
		return k
	}
	neg := r.ueMax(16)
	pos := r.ueMax(16)
	for i := uint32(0); i < neg+pos && !r.err; i++ {
		r.ue()    // delta_poc_s0/s1_minus1
		r.skip(1) // used_by_curr_pic_s0/s1_flag
	}
	return neg + pos
}
