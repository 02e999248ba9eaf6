# bash completion for blockmm and its tools (installed as
# share/bash-completion/completions/<command>, one copy a command, for on-demand loading).

_blockmm_complete() {
  # shellcheck disable=SC2034 # words and cword are set by _init_completion
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -s || return
  else
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
  fi
  local options values=""
  case ${COMP_WORDS[0]##*/} in
    blockmm)
      options="--backend --format --threads --stats --stats-file --progress --quiet --verbose --chunk-size --mem-budget --help --version"
      case $prev in
        --backend) values="auto cpu cuda reference" ;;
        --format) values="auto bin h5" ;;
        --progress) values="auto bar lines none" ;;
        --stats) values="text json" ;;
        --chunk-size | --mem-budget) values="64M 256M 1G 4G" ;;
        --threads) values="1 2 4 8 16 32 64" ;;
      esac
      ;;
    blockmm-gen)
      options="--n --m --k --density --min-value --max-value --seed --order --skew --zero-blocks --threads --quiet --help"
      [[ $prev == --order ]] && values="shuffled sorted reverse"
      ;;
    blockmm-cmp) options="--strict --quiet --help" ;;
    blockmm-info) options="--json --help" ;;
    blockmm-convert)
      options="--to --values --help"
      case $prev in
        --to) values="auto h5 bin" ;;
        --values) values="u16 u32" ;;
      esac
      ;;
  esac
  if [[ -n $values ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur")
  elif [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _blockmm_complete blockmm blockmm-gen blockmm-cmp blockmm-info blockmm-convert
