# Sourced: a private apt for fetching single packages of other Debian suites from the
# mirror this machine's apt uses, without touching the system's apt (its sources, lists,
# cache and dpkg status are never read or written). Used by scripts/containerd-versions
# and scripts/debian-package.
# shellcheck shell=bash

KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# The URI of the Debian mirror this machine's apt uses for its own release (not -security,
# not -updates): the first enabled `deb` source naming the release's codename, in
# /etc/apt/sources.list.d/*.sources (deb822) or /etc/apt/sources.list (one-line).
debian_mirror() {
    local codename uri f
    codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || return 1
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # Paragraphs are separated by blank lines; fields may appear in any order.
        uri=$(awk -v want="$codename" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") &&
                    enabled != "no" && uris != "" && !found) {
                    split(uris, u, " "); print u[1]; found = 1
                }
                types = ""; suites = ""; uris = ""; enabled = ""
            }
            /^[ \t]*$/ { flush(); next }
            /^#/ { next }
            tolower($1) == "types:"   { $1 = ""; types = $0 }
            tolower($1) == "suites:"  { $1 = ""; suites = $0 }
            tolower($1) == "uris:"    { $1 = ""; uris = $0 }
            tolower($1) == "enabled:" { enabled = tolower($2) }
            END { flush() }' "$f" | sed 's/^ *//')
        [ -n "$uri" ] && { printf '%s\n' "$uri"; return 0; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENT...
        uri=$(sed -E 's/\[[^]]*\]//' "$f" |
            awk -v want="$codename" '$1 == "deb" && $3 == want { print $2; exit }')
        [ -n "$uri" ] && { printf '%s\n' "$uri"; return 0; }
    done
    return 1
}

# A private apt for SUITES (space-separated) under DIR: a config file for APT_CONFIG that
# replaces every Dir:: the system's apt would use, so neither side sees the other.
write_private_apt() {
    local dir=$1 mirror=$2 s
    shift 2
    mkdir -p "$dir"/{etc/apt.conf.d,etc/preferences.d,etc/trusted.gpg.d,lists/partial,cache/archives/partial,state,debs}
    : >"$dir/status"
    : >"$dir/etc/sources.list"
    for s in "$@"; do
        printf 'deb [signed-by=%s] %s %s main\n' "$KEYRING" "$mirror" "$s" >>"$dir/etc/sources.list"
    done
    # Of the system's apt configuration only how it reaches the mirror carries over: its
    # proxy, retries, and whether it checks Release dates (a machine whose clock or mirror
    # snapshot is off has Check-Valid-Until "false"; without it sid's InRelease is "expired").
    local carried=(Acquire::http::Proxy Acquire::https::Proxy Acquire::Retries
        Acquire::http::Timeout Acquire::Check-Valid-Until Acquire::Check-Date
        Acquire::Max-ValidTime) key value
    {
        printf 'Dir::Etc::main "/dev/null";\n'
        printf 'Dir::Etc::Parts "%s";\n' "$dir/etc/apt.conf.d"
        printf 'Dir::Etc::SourceList "%s";\n' "$dir/etc/sources.list"
        printf 'Dir::Etc::SourceParts "/dev/null";\n'
        printf 'Dir::Etc::Preferences "%s";\n' "$dir/etc/preferences"
        printf 'Dir::Etc::PreferencesParts "%s";\n' "$dir/etc/preferences.d"
        printf 'Dir::Etc::Trusted "%s";\n' "$dir/etc/trusted.gpg"
        printf 'Dir::Etc::TrustedParts "%s";\n' "$dir/etc/trusted.gpg.d"
        printf 'Dir::State "%s";\n' "$dir/state"
        printf 'Dir::State::Lists "%s";\n' "$dir/lists"
        printf 'Dir::State::status "%s";\n' "$dir/status"
        printf 'Dir::Cache "%s";\n' "$dir/cache"
        printf 'Acquire::Languages "none";\n'
        printf 'APT::Update::Error-Mode "any";\n'
        # As root apt would download as _apt, which may not reach this tree.
        printf 'APT::Sandbox::User "root";\n'
        for key in "${carried[@]}"; do
            value=$(apt-config dump --format '%f %v%n' "$key" 2>/dev/null |
                awk -v k="$key" '$1 == k { sub(/^[^ ]* /, ""); print; exit }')
            [ -z "$value" ] || printf '%s "%s";\n' "$key" "$value"
        done
    } >"$dir/apt.conf"
}

# papt DIR COMMAND...: runs an apt command on the private apt in DIR.
papt() { local dir=$1; shift; APT_CONFIG="$dir/apt.conf" "$@"; }
