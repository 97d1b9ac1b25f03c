# bash completion for memview: generated from internal/cli/commands.go by internal/cli/gendocs; do not edit.
_memview() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i
	case $prev in
	-follow | --follow | -f | --f)
		:
		return
		;;
	-save | --save | -o | --o)
		:
		return
		;;
	-dump-threads | --dump-threads)
		:
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "-f --follow -o --save --dump-threads --disable-builtin-suppressions -h --help --version" -- "$cur"))
		return
	fi
}
complete -o bashdefault -o default -F _memview memview
