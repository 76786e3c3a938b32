package agent

import "syscall"

// diskUsedPercent returns how full the file system holding path is, 0-100, rounded to 0.01.
func diskUsedPercent(path string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	if st.Blocks == 0 {
		return 0, nil
	}
	used := float64(st.Blocks-st.Bfree) / float64(st.Blocks) * 100
	return float64(int64(used*100+0.5)) / 100, nil
}
