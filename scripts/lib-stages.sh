# shellcheck shell=bash
# scripts/test's account of its stages: what each ran, what was skipped and why, and the
# rule that a CI run skips nothing it did not declare. Sourced after scripts/lib.sh (say,
# die); testkit/tests/test_stages.rs runs these functions on made-up stages.
#
# A stage is recorded as "LABEL<TAB>passed<TAB>failed" ("-" for a stage that runs no cargo
# test) in the array `stages`; a skip as "STAGE: why" in the array `skipped`; CI_MAY_SKIP
# lists "STAGE: why" for each stage a CI run may skip (declared by the sourcing script).
stages=()
skipped=()

# The cargo test results in LOG, as a stage named LABEL.
stage_counts() {
    awk -v label="$1" '/^test result:/ { p += $4; f += $6 }
        END { printf "%s\t%d\t%d\n", label, p, f }' "$2"
}

# Each stage with its count, then the stages skipped.
print_stages() {
    local stage label passed failed joined
    echo "stages:"
    for stage in "${stages[@]}"; do
        IFS=$'\t' read -r label passed failed <<<"$stage"
        if [ "$passed" = - ]; then
            echo "    $label: ran"
        else
            echo "    $label: $passed passed, $failed failed"
        fi
    done
    if [ ${#skipped[@]} -eq 0 ]; then
        echo "skipped stages: none"
    else
        joined=$(printf '%s; ' "${skipped[@]}")
        echo "skipped stages: ${joined%; }"
    fi
}

# Under CI=true, dies on the first skipped stage CI_MAY_SKIP does not name.
refuse_undeclared_skips() {
    local skip may allowed
    [ "${CI:-}" = true ] || return 0
    for skip in "${skipped[@]}"; do
        allowed=false
        for may in "${CI_MAY_SKIP[@]}"; do
            [ "${may%%:*}" = "${skip%%:*}" ] && allowed=true
        done
        $allowed || die "CI=true and a stage was skipped: $skip (a CI run runs every stage; CI_MAY_SKIP in scripts/test declares the exceptions with their reason)"
    done
}
