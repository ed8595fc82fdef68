module dra-scheduler/bench/trace/gorand

go 1.22
