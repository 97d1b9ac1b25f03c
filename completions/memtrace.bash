# bash completion for memtrace: generated from internal/cli/commands.go by internal/cli/gendocs; do not edit.
_memtrace_report() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i
	case $prev in
	-peak-limit | --peak-limit | -n | --n)
		:
		return
		;;
	-sub-peak-limit | --sub-peak-limit | -s | --s)
		:
		return
		;;
	-file | --file | -f | --f)
		:
		return
		;;
	-pid | --pid)
		:
		return
		;;
	-filter-bt-function | --filter-bt-function)
		:
		return
		;;
	-progress | --progress)
		COMPREPLY=($(compgen -W "auto 1 0" -- "$cur"))
		return
		;;
	-diff | --diff | -d | --d)
		:
		return
		;;
	-suppressions | --suppressions)
		:
		return
		;;
	-json | --json)
		:
		return
		;;
	-folded | --folded | -F | --F | -print-flamegraph | --print-flamegraph)
		:
		return
		;;
	-cost | --cost | -flamegraph-cost-type | --flamegraph-cost-type)
		COMPREPLY=($(compgen -W "allocations temporary leaked peak" -- "$cur"))
		return
		;;
	-massif | --massif | -M | --M | -print-massif | --print-massif)
		:
		return
		;;
	-massif-threshold | --massif-threshold)
		:
		return
		;;
	-massif-detailed-freq | --massif-detailed-freq)
		:
		return
		;;
	-pprof | --pprof)
		:
		return
		;;
	-html | --html)
		:
		return
		;;
	-aggregate | --aggregate)
		COMPREPLY=($(compgen -d -- "$cur"))
		return
		;;
	-output-prefix | --output-prefix)
		:
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "-a --print-allocators -p --print-peaks -l --print-leaks -T --print-temporary --print-largest -n --peak-limit -s --sub-peak-limit -m --merge-backtraces --resolve --full-stacks -t --shorten-templates --full-names -h --help --version -f --file --pid --filter-bt-function --progress -d --diff --suppressions --print-suppressions --disable-builtin-suppressions --json -F --folded --print-flamegraph --cost --flamegraph-cost-type -M --massif --print-massif --massif-threshold --massif-detailed-freq --pprof --html --aggregate --output-prefix" -- "$cur"))
		return
	fi
}
_memtrace() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i
	for ((i = 1; i < COMP_CWORD; i++)); do
		if [[ ${COMP_WORDS[i]} == -- ]]; then
			((i == COMP_CWORD - 1)) && COMPREPLY=($(compgen -c -- "$cur"))
			return
		fi
	done
	if ((COMP_CWORD > 1)) && [[ ${COMP_WORDS[1]} == report ]]; then
		_memtrace_report
		return
	fi
	case $prev in
	-p | --p)
		COMPREPLY=($(compgen -W "$(ps -eo pid= 2>/dev/null)" -- "$cur"))
		return
		;;
	-comm | --comm)
		COMPREPLY=($(compgen -c -- "$cur"))
		return
		;;
	-cgroup | --cgroup)
		COMPREPLY=($(compgen -d -- "$cur"))
		return
		;;
	-max-procs | --max-procs)
		:
		return
		;;
	-max-samples | --max-samples)
		:
		return
		;;
	-max-proc-samples | --max-proc-samples)
		:
		return
		;;
	-config | --config)
		:
		return
		;;
	-track | --track)
		COMPREPLY=($(compgen -W "malloc mmap fd dmabuf ion" -- "$cur"))
		return
		;;
	-min-size | --min-size)
		:
		return
		;;
	-sample | --sample)
		:
		return
		;;
	-stack-depth | --stack-depth)
		:
		return
		;;
	-stack-threads | --stack-threads)
		:
		return
		;;
	-track-threads | --track-threads)
		:
		return
		;;
	-stack-unwind | --stack-unwind)
		COMPREPLY=($(compgen -W "dwarf fp" -- "$cur"))
		return
		;;
	-o | --o)
		:
		return
		;;
	-port | --port)
		:
		return
		;;
	-listen | --listen)
		:
		return
		;;
	-http | --http)
		:
		return
		;;
	-profile-dir | --profile-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return
		;;
	-report-dir | --report-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return
		;;
	-interval | --interval)
		:
		return
		;;
	-peak-top-n | --peak-top-n)
		:
		return
		;;
	-buffer-size | --buffer-size)
		:
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "-p --comm --cgroup --all --max-procs --max-samples --max-proc-samples -f --follow --preload --config -v -h --help --version --track --mmap-files --min-size --sample --stack-depth --stack-threads --no-free-stacks --track-threads --stack-unwind -o --port --listen --http --profile-dir --report-dir --interval --peak-top-n --buffer-size --no-uprobe-multi --floor" -- "$cur"))
		return
	fi
	if ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W report -- "$cur") $(compgen -c -- "$cur"))
	fi
}
complete -o bashdefault -o default -F _memtrace memtrace
