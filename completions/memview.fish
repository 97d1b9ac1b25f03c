# fish completion for memview: generated from internal/cli/commands.go by internal/cli/gendocs; do not edit.
complete -c memview -l follow -s f -r -F -d 'follow LOG as it grows'
complete -c memview -l save -s o -r -F -d 'with a [HOST]:PORT stream'
complete -c memview -l dump-threads -r -F -d 'print the per-thread table'
complete -c memview -l disable-builtin-suppressions -d 'count what system libraries keep for good'
complete -c memview -l help -s h -d 'print this help and exit'
complete -c memview -l version -d 'print the version and exit'
