package spec

import "strings"

// Tracking names what a stack follows: "<repo>@<branch>", "<repo>@<commit>"
// or "program <name>", the repository's URL without credentials.
func Tracking(s *StackSpec) string {
	switch {
	case s.ProgramRef != nil:
		return "program " + s.ProgramRef.Name
	case s.Branch != "":
		return RedactURL(s.ProjectRepo) + "@" + s.Branch
	}
	return RedactURL(s.ProjectRepo) + "@" + s.Commit
}

// CommitURL is the web page of a commit of the repository at repo, with
// "{sha}" in place of the hash, for a repository on a forge: an HTTPS or
// SSH URL with a host. GitHub, Gitea and Forgejo serve /commit/<sha>,
// and GitLab redirects it to its own path. Empty for a local repository.
func CommitURL(repo string) string {
	u := strings.TrimSuffix(strings.TrimSuffix(RedactURL(repo), "/"), ".git")
	scheme, rest, ok := strings.Cut(u, "://")
	switch {
	case ok && (scheme == "https" || scheme == "http" || scheme == "ssh"):
	case !ok && strings.Contains(u, "@") && strings.Contains(u, ":"): // git@host:owner/repo
		rest = strings.Replace(u, ":", "/", 1)
	default:
		return ""
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	host, path, _ := strings.Cut(rest, "/")
	host = strings.Split(host, ":")[0] // an SSH port is not the web's
	if host == "" || path == "" {
		return ""
	}
	return "https://" + host + "/" + path + "/commit/{sha}"
}
