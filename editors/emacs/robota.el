;;; robota.el --- Client for the robotad agent daemon -*- lexical-binding: t -*-

;; Author: robota contributors
;; Version: 0.1.0
;; Package-Requires: ((emacs "27.1") (jsonrpc "1.0.9"))
;; Keywords: tools, processes, convenience
;; SPDX-License-Identifier: MIT

;; This file is not part of GNU Emacs.

;;; Commentary:

;; robota.el is a small client for robotad, the per-user daemon that owns
;; AI-agent sessions.  It speaks JSON-RPC 2.0 to the daemon's Unix socket
;; through Emacs's built-in jsonrpc.el (Content-Length framing), so nothing
;; beyond Emacs itself is needed.
;;
;; One session per project: `robota-start-session' creates it with the
;; project root as its working directory, `robota-send-prompt' and
;; `robota-send-region' run turns in it (creating it on first use), and the
;; reply streams into a "*robota: PROJECT*" buffer as it is written, with
;; tool calls and permission decisions shown one line each.  When the agent
;; asks to run a tool that needs consent, Emacs asks `y-or-n-p' for each
;; request, showing the tool and its exact arguments, and answers the daemon.
;; Nothing ever waits for the model: every call is asynchronous and the
;; outcome arrives as events.
;;
;; Commands: `robota-start-session', `robota-attach-session',
;; `robota-send-prompt', `robota-send-region', `robota-review-pending',
;; `robota-abort', `robota-status', `robota-switch-to-buffer'.  They are
;; gathered in `robota-command-map', for example:
;;
;;   (global-set-key (kbd "C-c r") 'robota-command-map)
;;
;; The socket is found as robotad finds it: `robota-socket-path' when set,
;; else $ROBOTA_SOCKET, else $XDG_RUNTIME_DIR/robota/robotad.sock, else
;; /tmp/robota-UID/robotad.sock.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)

(defgroup robota nil
  "Client for the robotad agent daemon."
  :group 'tools
  :prefix "robota-")

(defcustom robota-socket-path nil
  "Path of robotad's Unix socket, or nil to find it like robotad does.
When nil, the first that is set of $ROBOTA_SOCKET,
$XDG_RUNTIME_DIR/robota/robotad.sock and /tmp/robota-UID/robotad.sock
is used, read afresh on every connection."
  :type '(choice (const :tag "Like robotad: environment, then defaults" nil)
                 (file :tag "Socket path"))
  :group 'robota)

(defcustom robota-session-parameters nil
  "Extra members of `session/create' for new sessions, as a plist.
For example (:provider \"local\" :permissionMode \"acceptEdits\").
The working directory (:cwd) is always the project root."
  :type '(plist :key-type symbol :value-type sexp)
  :group 'robota)

(defcustom robota-project-root-function #'robota-default-project-root
  "Function of no arguments returning the current project's root directory.
A session belongs to the directory it returns and uses it as its cwd."
  :type 'function
  :group 'robota)

(defcustom robota-approval-function #'robota-ask-approval
  "Function deciding one approval request; non-nil approves it.
Called with the request, a plist with :tool, :arguments and :reason, in
the buffer the session writes to.  The default asks with `y-or-n-p'."
  :type 'function
  :group 'robota)

(defcustom robota-request-timeout 10
  "Seconds to wait for the daemon's answer to a short request.
Turns are never bounded by it: their outcome arrives as events."
  :type 'number
  :group 'robota)

(defcustom robota-display-output t
  "Non-nil means show the session's buffer when a prompt is sent."
  :type 'boolean
  :group 'robota)

(defcustom robota-preview-width 100
  "Widest rendering of tool arguments and previews, in characters."
  :type 'integer
  :group 'robota)

(defcustom robota-events-buffer-size 0
  "Size of the \"*robota events*\" protocol log, in characters.
0 keeps no log (the default); nil keeps everything.  Takes effect on
the next connection."
  :type '(choice (const :tag "Unlimited" nil) integer)
  :group 'robota)

(defcustom robota-event-functions nil
  "Abnormal hook run with each session event, in order, once each.
Every function is called with the session id and the event, a plist
such as (:type \"text_delta\" :seq 4 :turnId \"...\" :text \"...\")."
  :type 'hook
  :group 'robota)

(defface robota-prompt '((t :inherit minibuffer-prompt))
  "Face of the user's prompt in a session buffer."
  :group 'robota)

(defface robota-tool '((t :inherit font-lock-function-name-face))
  "Face of tool calls in a session buffer."
  :group 'robota)

(defface robota-notice '((t :inherit shadow))
  "Face of permission decisions, previews and other notices."
  :group 'robota)

(defface robota-failure '((t :inherit error))
  "Face of failed tools, denials and failed turns."
  :group 'robota)

;;;; State

(cl-defstruct (robota--session (:constructor robota--session-create)
                               (:copier nil))
  "What Emacs knows of one daemon session bound to a project root.
LAST-SEQ is the last event seen; CONNECTION the one it is subscribed
on; STATE one of idle, running, waiting; ASKED the ids of the approval
requests being asked or answered (one execution asks again, with new
requests, each time a later round of its turn needs consent); CONTEXT
the last ContextState plist seen."
  id root buffer (last-seq 0) connection (state 'idle) asked context)

(defvar robota--connection nil
  "The live `jsonrpc-process-connection' to robotad, or nil.")

(defvar robota--server-info nil
  "The daemon's `initialize' result on the current connection.")

(defvar robota--sessions-by-root (make-hash-table :test #'equal)
  "Project root (directory name without trailing slash) to session.")

(defvar robota--sessions-by-id (make-hash-table :test #'equal)
  "Session id to session.")

(defvar-local robota--buffer-session nil
  "The session whose events this buffer shows.")

(defvar robota--id-counter 0
  "Counter mixed into generated ids.")

(defvar robota--asking nil
  "While an approval question is open: (SESSION . EXECUTION) it is about.
Another client's answer to that execution ends the question.")

(defvar robota-prompt-history nil
  "Minibuffer history of `robota-send-prompt'.")

(defconst robota-client-version "0.1.0"
  "Version of robota.el, sent to the daemon in `initialize'.")

(defconst robota--protocol-version 1
  "The robotad protocol version this client speaks.")

;;;; Socket path and connection

(defun robota--env (name)
  "Value of environment variable NAME, or nil when unset or empty."
  (let ((value (getenv name)))
    (and value (not (string-empty-p value)) value)))

(defun robota-resolve-socket-path ()
  "Return the socket path to connect to (PROTOCOL section 1).
First that is set: `robota-socket-path', $ROBOTA_SOCKET,
$XDG_RUNTIME_DIR/robota/robotad.sock, /tmp/robota-UID/robotad.sock."
  (cond ((and robota-socket-path (not (string-empty-p robota-socket-path)))
         (expand-file-name robota-socket-path))
        ((robota--env "ROBOTA_SOCKET"))
        ((robota--env "XDG_RUNTIME_DIR")
         (concat (file-name-as-directory (robota--env "XDG_RUNTIME_DIR"))
                 "robota/robotad.sock"))
        (t (format "/tmp/robota-%d/robotad.sock" (user-real-uid)))))

(defun robota-connection ()
  "Return the live connection to robotad, connecting when there is none.
Signals a `user-error' naming the socket when robotad cannot be reached."
  (if (and robota--connection (jsonrpc-running-p robota--connection))
      robota--connection
    (setq robota--connection nil
          robota--server-info nil)
    (let ((connection (robota--connect (robota-resolve-socket-path))))
      (setq robota--connection connection)
      (robota--handshake connection)
      connection)))

(defun robota--connect (path)
  "Open a JSON-RPC connection to the robotad socket at PATH."
  (let ((process
         (condition-case err
             (make-network-process :name "robota"
                                   :family 'local
                                   :service path
                                   :coding 'utf-8-emacs-unix
                                   :noquery t)
           (file-error
            (user-error "Cannot reach robotad at %s (%s); start `robotad' \
or its systemd socket, or set `robota-socket-path'"
                        path (robota--os-reason err))))))
    (make-instance 'jsonrpc-process-connection
                   :name "robota"
                   :process process
                   :events-buffer-scrollback-size robota-events-buffer-size
                   :request-dispatcher #'robota--refuse-request
                   :notification-dispatcher #'robota--dispatch-notification
                   :on-shutdown #'robota--connection-closed)))

(defun robota--os-reason (err)
  "The operating system's reason carried by ERR, a signalled `file-error'.
Such an error reads (file-error WHAT REASON ARGUMENTS...): only REASON,
such as \"No such file or directory\", says something to a person."
  (let ((reason (nth 2 err)))
    (if (stringp reason) reason (error-message-string err))))

(defun robota--handshake (connection)
  "Send `initialize' on CONNECTION and remember the daemon's answer."
  (jsonrpc-async-request
   connection 'initialize
   (list :clientInfo (list :name "robota.el" :version robota-client-version))
   :success-fn
   (lambda (result)
     (when (eq connection robota--connection)
       (setq robota--server-info result))
     (let ((version (plist-get result :protocolVersion)))
       (unless (eql version robota--protocol-version)
         (display-warning
          'robota
          (format "robotad speaks protocol %s; robota.el speaks %s"
                  version robota--protocol-version)))))
   :error-fn #'ignore
   :timeout robota-request-timeout
   :timeout-fn #'ignore))

(defun robota--refuse-request (_connection method _params)
  "Answer a request from the daemon for METHOD: clients serve none."
  (jsonrpc-error :code -32601 :message (format "method not found: %s" method)))

(defun robota--connection-closed (connection)
  "Forget CONNECTION, which has closed, and tell the sessions using it."
  (when (eq connection robota--connection)
    (setq robota--connection nil
          robota--server-info nil))
  (maphash
   (lambda (_id session)
     (when (eq (robota--session-connection session) connection)
       (setf (robota--session-connection session) nil)
       ;; A waiting approval waits on: `robota-review-pending' answers it.
       (when (eq (robota--session-state session) 'running)
         (robota--insert-line
          session "[connection to robotad closed; the turn's outcome is \
unknown until reconnecting: `M-x robota-status']"
          'robota-failure))))
   robota--sessions-by-id))

(defun robota-disconnect ()
  "Close the connection to robotad; the daemon and its sessions go on."
  (interactive)
  (when robota--connection
    (jsonrpc-shutdown robota--connection)
    (setq robota--connection nil)))

;;;; Requests

(defmacro robota--guarded (what &rest body)
  "Run BODY; report an error it signals as a failure of WHAT.
Errors must not escape into jsonrpc.el's process filter or a timer."
  (declare (indent 1) (debug t))
  (let ((err (make-symbol "err")))
    `(condition-case ,err
         (progn ,@body)
       (error (message "robota: %s: %s" ,what (error-message-string ,err))
              nil))))

(defun robota-error-code (err)
  "The JSON-RPC error code carried by ERR, a signalled `jsonrpc-error'."
  (alist-get 'jsonrpc-error-code (cdr err)))

(defun robota-request (method &optional params timeout)
  "Call METHOD with PARAMS on robotad and return its result.
METHOD is a symbol such as \\='daemon/status; PARAMS a plist or nil.
Waits at most TIMEOUT seconds (default `robota-request-timeout').
A JSON-RPC error is signalled as `jsonrpc-error'; see
`robota-error-code'.  Meant for quick calls: turns use the commands."
  (jsonrpc-request (robota-connection) method params
                   :timeout (or timeout robota-request-timeout)))

(cl-defun robota--call (method params &key session on-result on-error
                               (timeout robota-request-timeout))
  "Call METHOD with PARAMS asynchronously; never blocks.
ON-RESULT gets the result.  ON-ERROR gets the error plist (:code
:message :data) and returns non-nil when it handled it; otherwise the
error is reported in SESSION's buffer and the echo area.  TIMEOUT nil
waits for as long as the daemon takes."
  (jsonrpc-async-request
   (robota-connection) method params
   :success-fn (lambda (result)
                 (when on-result
                   (robota--guarded method (funcall on-result result))))
   :error-fn (lambda (err)
               (robota--guarded method
                 (unless (and on-error (funcall on-error err))
                   (robota--report-error session method err))))
   :timeout timeout
   :timeout-fn (lambda ()
                 (robota--report-error
                  session method
                  (list :message (format "no answer within %s s" timeout))))))

(defun robota--report-error (session method err)
  "Report ERR, a JSON-RPC error plist, of METHOD in SESSION's buffer."
  (let* ((code (plist-get err :code))
         (text (format "%s failed: %s%s" method
                       (or (plist-get err :message) "unknown error")
                       (pcase code
                         (-32001 " (a turn is running: `robota-abort')")
                         (-32005 " (approval pending: `robota-review-pending')")
                         (_ "")))))
    (when session
      (robota--insert-aside session (concat "✗ " text) 'robota-failure))
    (message "robota: %s" text)))

(defun robota--new-id ()
  "A fresh UUID-shaped random identifier."
  (let ((hash (md5 (format "%s %s %s %s %s" (emacs-pid) (float-time)
                           (cl-incf robota--id-counter)
                           (random most-positive-fixnum) (system-name)))))
    (format "%s-%s-4%s-%s-%s" (substring hash 0 8) (substring hash 8 12)
            (substring hash 13 16) (substring hash 16 20)
            (substring hash 20 32))))

;;;; Projects and sessions

(defun robota-default-project-root ()
  "The root of the current project, or `default-directory' outside one."
  (let ((project (project-current nil)))
    (cond ((null project) default-directory)
          ((fboundp 'project-root) (project-root project))
          (t (car (with-no-warnings (project-roots project)))))))

(defun robota--project-root ()
  "The canonical root of the current project, an existing local directory."
  (let ((root (funcall robota-project-root-function)))
    (when (file-remote-p root)
      (user-error "Robota works on local directories; %s is remote" root))
    (setq root (directory-file-name (expand-file-name root)))
    (unless (file-directory-p root)
      (user-error "Not a directory: %s" root))
    root))

(defun robota-session-id (&optional root)
  "The session id remembered for ROOT (default: the current project)."
  (let ((session (gethash (or root (robota--project-root))
                          robota--sessions-by-root)))
    (and session (robota--session-id session))))

(defun robota--session-buffer-for (root)
  "The output buffer of ROOT's sessions, created when missing."
  (let* ((previous (gethash root robota--sessions-by-root))
         (directory (file-name-as-directory root))
         (buffer (or (and previous (robota--session-buffer previous))
                     (cl-find-if
                      (lambda (buffer)
                        (with-current-buffer buffer
                          (and (derived-mode-p 'robota-output-mode)
                               (equal default-directory directory))))
                      (buffer-list)))))
    (if (buffer-live-p buffer)
        buffer
      (let ((name (file-name-nondirectory root)))
        (with-current-buffer
            (generate-new-buffer
             (format "*robota: %s*" (if (string-empty-p name) root name)))
          (robota-output-mode)
          (setq default-directory directory)
          (current-buffer))))))

(defun robota--register (root session-id)
  "Remember SESSION-ID as ROOT's session and return it."
  (let* ((buffer (robota--session-buffer-for root))
         (previous (gethash root robota--sessions-by-root))
         (session (robota--session-create :id session-id :root root
                                          :buffer buffer)))
    (when previous
      (remhash (robota--session-id previous) robota--sessions-by-id))
    (puthash root session robota--sessions-by-root)
    (puthash session-id session robota--sessions-by-id)
    (with-current-buffer buffer
      (setq robota--buffer-session session))
    (robota--insert-line
     session (format "── session %s in %s ──" session-id root) 'robota-notice)
    session))

(defun robota--live-buffer (session)
  "SESSION's output buffer, made anew (and headed) if it was killed."
  (let ((buffer (robota--session-buffer session)))
    (unless (buffer-live-p buffer)
      (setq buffer (robota--session-buffer-for (robota--session-root session)))
      (setf (robota--session-buffer session) buffer)
      (with-current-buffer buffer
        (setq robota--buffer-session session))
      (robota--insert-line
       session (format "── session %s in %s ──" (robota--session-id session)
                       (robota--session-root session))
       'robota-notice))
    buffer))

(defun robota--forget (session)
  "Stop remembering SESSION."
  (remhash (robota--session-id session) robota--sessions-by-id)
  (when (eq (gethash (robota--session-root session) robota--sessions-by-root)
            session)
    (remhash (robota--session-root session) robota--sessions-by-root)))

(defun robota--create-session (root then)
  "Create a session in ROOT, subscribe to it, then call THEN with it."
  (robota--call
   'session/create
   (append (list :cwd root)
           (robota--plist-without robota-session-parameters :cwd))
   :on-result (lambda (info)
                (let ((session (robota--register
                                root (plist-get info :sessionId))))
                  (robota--subscribe session then)))))

(defun robota--plist-without (plist key)
  "A copy of PLIST without KEY."
  (cl-loop for (k v) on plist by #'cddr
           unless (eq k key) append (list k v)))

(cl-defun robota--subscribe (session then &key after recreate)
  "Subscribe to SESSION's events on the current connection, then call THEN.
THEN, when non-nil, is called with SESSION once subscribed.  AFTER is
the seq after which the daemon's buffered events are replayed first:
nil means after the last one seen (only new events when none was
seen), an integer replays those after it (0: every buffered event),
`now' asks for new events only.  When the daemon no longer holds the
events asked for (-32012: it restarted, or they fell out of its
buffer), a line says so and those it holds are replayed.  When it no
longer has the session (-32002), the session is forgotten; with
RECREATE a new one is created in its root and THEN gets that one."
  (let* ((connection (robota-connection))
         (seen (robota--session-last-seq session))
         (after (cond ((eq after 'now) nil)
                      ((integerp after) after)
                      ((> seen 0) seen))))
    (when after
      ;; Replayed events may arrive before the answer: let them through.
      (setf (robota--session-last-seq session) after))
    (robota--call
     'session/subscribe
     (append (list :sessionId (robota--session-id session))
             (and after (list :afterSeq after)))
     :session session
     :on-result
     (lambda (result)
       (setf (robota--session-connection session) connection)
       (let ((latest (plist-get result :latestSeq)))
         (when (and (null after) (integerp latest))
           (setf (robota--session-last-seq session) latest)))
       (when then (funcall then session)))
     :on-error
     (lambda (err)
       (pcase (plist-get err :code)
         (-32012
          (setf (robota--session-last-seq session) seen)
          (robota--resubscribe-after-loss session then after err)
          t)
         (-32002
          (robota--forget session)
          (if (not recreate)
              (let ((text "robotad no longer has this session; \
`robota-start-session' starts a new one"))
                (robota--insert-line session (format "[%s]" text)
                                     'robota-failure)
                (message "robota: %s" text))
            (robota--insert-line
             session "[robotad no longer has this session; starting anew]"
             'robota-notice)
            (robota--create-session (robota--session-root session) then))
          t))))))

(defun robota--resubscribe-after-loss (session then after err)
  "Subscribe to SESSION again after ERR, a -32012 answer to AFTER.
Say which events are gone, then replay those the daemon still holds
and call THEN."
  (let ((oldest (plist-get (plist-get err :data) :oldestSeq)))
    (robota--insert-line
     session
     (cond ((not (integerp oldest))
            (format "[%s]" (or (plist-get err :message) "events were lost")))
           ((<= oldest (1+ (or after 0)))
            ;; AFTER lies beyond the last event this daemon published.
            "[robotad restarted since the last event shown here]")
           (t (format "[events %d to %d are lost: robotad no longer holds them]"
                      (1+ after) (1- oldest))))
     'robota-notice)
    (robota--subscribe session then
                       :after (if (integerp oldest) (max 0 (1- oldest)) 'now))))

(defun robota--when-subscribed (session then &optional recreate)
  "Call THEN with SESSION once it is subscribed on the current connection.
A session last subscribed on another connection (robotad restarted, or
the connection closed) is subscribed again first, replaying what it
missed, so that nothing talks to a session whose events go unseen.
RECREATE is passed to `robota--subscribe'."
  (if (and (robota--session-connection session)
           (eq (robota--session-connection session) (robota-connection)))
      (funcall then session)
    (robota--subscribe session then :recreate recreate)))

(defun robota--with-session (root then)
  "Call THEN with ROOT's session, created or resubscribed as needed."
  (let ((session (gethash root robota--sessions-by-root)))
    (if (null session)
        (robota--create-session root then)
      (robota--when-subscribed session then t))))

;;;; Commands

;;;###autoload
(defun robota-start-session (&optional ask)
  "Create a new robotad session for the current project and remember it.
Its cwd is the project root (see `robota-project-root-function').
With prefix argument ASK, read the provider and model to use."
  (interactive "P")
  (let ((root (robota--project-root))
        (robota-session-parameters robota-session-parameters))
    (when ask
      (dolist (member '((:provider . "Provider (empty: default): ")
                        (:model . "Model (empty: default): ")))
        (let ((value (read-string (cdr member))))
          (unless (string-empty-p value)
            (setq robota-session-parameters
                  (plist-put (robota--plist-without robota-session-parameters
                                                    (car member))
                             (car member) value))))))
    (robota--create-session
     root
     (lambda (session)
       (robota--show session)
       (message "robota: session %s for %s"
                (robota--session-id session) root)))))

;;;###autoload
(defun robota-attach-session (session-id)
  "Bind the current project to the existing daemon session SESSION-ID.
Interactively, choose among the daemon's sessions, those whose cwd is the
project root first.  The events robotad still holds are replayed into
the project's buffer, and an approval the session waits for is asked.
A SESSION-ID robotad does not know or refuses is a `user-error'."
  (interactive
   (let* ((root (robota--project-root))
          (sessions (plist-get (robota-request 'session/list nil)
                               :sessions))
          (choices (mapcar (lambda (s)
                             (cons (format "%s  %s" (plist-get s :sessionId)
                                           (or (plist-get s :cwd) "?"))
                                   (plist-get s :sessionId)))
                           (cl-sort (append sessions nil) #'string>
                                    :key (lambda (s)
                                           (if (equal (plist-get s :cwd) root)
                                               "1" "0"))))))
     (unless choices (user-error "The daemon has no sessions"))
     (list (cdr (assoc (completing-read "Session: " choices nil t) choices)))))
  (let ((root (robota--project-root)))
    (condition-case err
        (robota-request 'session/get (list :sessionId session-id))
      (jsonrpc-error
       (if (eql (robota-error-code err) -32002)
           (user-error "No session %s" session-id)
         (user-error "Cannot attach to session %s: %s" session-id
                     (or (alist-get 'jsonrpc-error-message (cdr err))
                         (error-message-string err))))))
    (robota--subscribe (robota--register root session-id)
                       #'robota--after-attach :after 0)))

(defun robota--after-attach (session)
  "Show SESSION, just attached, and ask about an approval it waits for."
  (robota--show session)
  (robota--ask-pending session))

;;;###autoload
(defun robota-send-prompt (prompt)
  "Run a turn with PROMPT in the current project's session.
The session is created on first use.  Returns at once; the reply
streams into the session's buffer."
  (interactive (list (read-string "robota> " nil 'robota-prompt-history)))
  (when (string-empty-p (string-trim prompt))
    (user-error "Empty prompt"))
  (robota--with-session (robota--project-root)
                        (lambda (session) (robota--run session prompt))))

;;;###autoload
(defun robota-send-region (start end &optional instruction)
  "Run a turn whose prompt is the text between START and END.
With a prefix argument, read an INSTRUCTION that precedes the text.
The text is quoted with the file name and line numbers it came from."
  (interactive
   (if (use-region-p)
       (list (region-beginning) (region-end)
             (and current-prefix-arg (read-string "Instruction: ")))
     (user-error "No active region")))
  (robota-send-prompt (robota--region-prompt start end instruction)))

(defun robota--region-prompt (start end &optional instruction)
  "A prompt quoting the text between START and END, after INSTRUCTION."
  (let* ((text (buffer-substring-no-properties start end))
         (longest (let ((pos 0) (best 0))
                    (while (string-match "`+" text pos)
                      (setq best (max best (- (match-end 0)
                                              (match-beginning 0)))
                            pos (match-end 0)))
                    best))
         (fence (make-string (max 3 (1+ longest)) ?`))
         (file (buffer-file-name))
         (origin (when file
                   (format "From %s (lines %d-%d):\n"
                           (file-relative-name
                            file (file-name-as-directory
                                  (robota--project-root)))
                           (line-number-at-pos start)
                           (line-number-at-pos (max start (1- end)))))))
    (concat (if (and instruction (not (string-empty-p instruction)))
                (concat instruction "\n\n")
              "")
            origin
            fence "\n" text (if (string-suffix-p "\n" text) "" "\n") fence
            "\n")))

(defun robota--run (session prompt)
  "Start a turn with PROMPT in SESSION without waiting for it."
  (robota--show session)
  (setf (robota--session-state session) 'running)
  (robota--call
   'session/run
   (list :sessionId (robota--session-id session) :prompt prompt
         :turnId (robota--new-id) :wait :json-false)
   :session session
   :on-error (lambda (_err)
               (setf (robota--session-state session) 'idle)
               nil)))

;;;###autoload
(defun robota-review-pending ()
  "Answer the approval requests the current project's session waits on."
  (interactive)
  (let ((session (robota--current-session)))
    (robota--when-subscribed
     session
     (lambda (session) (robota--ask-pending session 'again)))))

(defun robota--ask-pending (session &optional again)
  "Ask about the approval requests SESSION waits on, as robotad has them.
A request already being asked about is not asked again, unless AGAIN
\(then \"nothing waits\" is also said when nothing does)."
  (robota--call
   'session/pending (list :sessionId (robota--session-id session))
   :session session
   :on-result
   (lambda (result)
     (let* ((pending (plist-get result :pending))
            (requests (plist-get pending :requests)))
       (cond ((null pending)
              (when again (message "robota: nothing waits for approval")))
             (t
              (setf (robota--session-state session) 'waiting)
              (when again
                (robota--unask session requests))
              (robota--schedule-approvals
               session (plist-get pending :executionId) requests)))))))

;;;###autoload
(defun robota-abort ()
  "Abort the running turn or compaction of the current project's session."
  (interactive)
  (robota--when-subscribed
   (robota--current-session)
   (lambda (session)
     (robota--call 'session/abort (list :sessionId (robota--session-id session))
                   :session session
                   :on-result
                   (lambda (result)
                     (message (if (eq (plist-get result :aborted) t)
                                  "robota: aborted"
                                "robota: nothing was running")))))))

;;;###autoload
(defun robota-status ()
  "Show the daemon's status and the current project's session in the echo area.
A session whose connection was lost is subscribed again first, so its
buffer shows what happened meanwhile."
  (interactive)
  (let ((session (gethash (robota--project-root) robota--sessions-by-root)))
    (robota--call
     'daemon/status nil
     :on-result
     (lambda (status)
       (if (null session)
           (message "%s" (robota--format-status status nil))
         (robota--when-subscribed
          session
          (lambda (session)
            (robota--call
             'session/get (list :sessionId (robota--session-id session))
             :session session
             :on-result
             (lambda (info)
               (message "%s" (robota--format-status status info)))))))))))

(defun robota--format-status (status info)
  "One line describing daemon STATUS and, when non-nil, session INFO."
  (let ((counts (plist-get status :sessions)))
    (concat
     (format (concat "robotad %s (pid %s, protocol %s): "
                     "%s loaded, %s running, %s waiting")
             (plist-get status :version) (plist-get status :pid)
             (plist-get status :protocolVersion)
             (plist-get counts :loaded) (plist-get counts :running)
             (plist-get counts :waiting))
     (if (null info)
         " | no session for this project"
       (format " | session %s: %s, %s/%s, %s messages, context %s%%"
               (plist-get info :sessionId)
               (cond ((eq (plist-get info :running) t) "running")
                     ((plist-get info :pending) "waiting for approval")
                     (t "idle"))
               (plist-get info :provider) (plist-get info :model)
               (plist-get info :messageCount)
               (plist-get (plist-get info :context) :usedPercentage))))))

;;;###autoload
(defun robota-switch-to-buffer ()
  "Show the current project's session buffer."
  (interactive)
  (pop-to-buffer (robota--live-buffer (robota--current-session))))

(defun robota--current-session ()
  "The current project's session, or a `user-error' when it has none."
  (or (and (derived-mode-p 'robota-output-mode) robota--buffer-session)
      (gethash (robota--project-root) robota--sessions-by-root)
      (user-error
       "No robota session for this project; `robota-start-session'")))

(defun robota--show (session)
  "Display SESSION's buffer without selecting it, if so configured.
A buffer that was killed is made anew, so what follows is seen."
  (let ((buffer (robota--live-buffer session)))
    (when robota-display-output
      (display-buffer buffer))))

;;;; Events

(defun robota--dispatch-notification (_connection method params)
  "Handle the daemon's notification METHOD with PARAMS."
  (when (eq method 'session/event)
    (robota--guarded "event" (robota--handle-event params))))

(defun robota--handle-event (event)
  "Render EVENT, a `session/event' plist, and act on it.
Events of unknown sessions and events already seen (by `seq') are
dropped, so a replay after resubscribing shows nothing twice."
  (let* ((session (gethash (plist-get event :sessionId) robota--sessions-by-id))
         (type (plist-get event :type))
         (seq (plist-get event :seq)))
    (cond
     ((null session))
     ((equal type "overflow")
      (robota--subscribe session nil))
     ((and (integerp seq) (<= seq (robota--session-last-seq session))))
     (t
      (when (integerp seq)
        (setf (robota--session-last-seq session) seq))
      (robota--apply-event session type event)
      (robota--render-event session type event)
      (run-hook-with-args 'robota-event-functions
                          (robota--session-id session) event)))))

(defun robota--apply-event (session type event)
  "Update SESSION's state for EVENT of TYPE."
  (pcase type
    ("turn_started" (setf (robota--session-state session) 'running))
    ("context_updated" (setf (robota--session-context session) event))
    ;; Asked only while robotad says it waits: a replayed request may be
    ;; long answered.
    ("approval_requested"
     (setf (robota--session-state session) 'waiting)
     (robota--ask-pending session))
    ;; Answered while this Emacs still asks: another client was first.
    ("approval_resolved"
     (when (robota--asked-about-p session (plist-get event :executionId))
       (run-at-time 0 nil #'robota--stop-asking session
                    (plist-get event :executionId))))
    ("turn_finished"
     (setf (robota--session-state session)
           (if (equal (plist-get event :status) "waiting") 'waiting 'idle)))
    ("session_closed"
     (setf (robota--session-state session) 'idle
           (robota--session-connection session) nil))))

(defun robota--render-event (session type event)
  "Write EVENT of TYPE into SESSION's buffer."
  (pcase type
    ("turn_started"
     (robota--insert-line session "" nil)
     (robota--insert-line
      session (replace-regexp-in-string
               "^" "> " (string-trim-right (or (plist-get event :prompt) "")))
      'robota-prompt))
    ("text_delta" (robota--insert session (or (plist-get event :text) "") nil))
    ("tool_started"
     (robota--insert-line
      session (format "⚙ %s %s" (plist-get event :tool)
                      (robota--format-arguments (plist-get event :arguments)))
      'robota-tool))
    ("permission_decided"
     (let ((decision (plist-get event :decision))
           (reason (plist-get event :reason)))
       (robota--insert-line
        session (format "  %s %s%s" decision (plist-get event :tool)
                        (if reason (concat ": " reason) ""))
        (if (equal decision "deny") 'robota-failure 'robota-notice))))
    ("tool_finished"
     (let ((ok (eq (plist-get event :ok) t)))
       (robota--insert-line
        session (format "  %s %s" (if ok "✓" "✗")
                        (robota--one-line (or (plist-get event :preview) "")))
        (if ok 'robota-notice 'robota-failure))))
    ("approval_requested"
     (mapc (lambda (request)
             (robota--insert-line
              session (format "  ? %s %s (%s)" (plist-get request :tool)
                              (robota--format-arguments
                               (plist-get request :arguments))
                              (plist-get request :reason))
              'robota-prompt))
           (plist-get event :requests)))
    ("approval_resolved"
     (robota--insert-line
      session (if (eq (plist-get event :approved) t) "  approved" "  denied")
      (if (eq (plist-get event :approved) t) 'robota-notice 'robota-failure)))
    ("compaction"
     (robota--insert-line
      session (format "[%s compaction %s]" (plist-get event :trigger)
                      (plist-get event :phase))
      'robota-notice))
    ("turn_finished"
     (let ((status (plist-get event :status)))
       (pcase status
         ("completed" (robota--fresh-line session))
         ("waiting" (robota--insert-line
                     session "[waiting for approval: `robota-review-pending']"
                     'robota-notice))
         (_ (robota--insert-line
             session (format "✗ turn %s: %s" status
                             (or (plist-get (plist-get event :error) :message)
                                 "no detail"))
             'robota-failure)))
       (dolist (failure (append (plist-get event :hookFailures) nil))
         (robota--insert-line
          session (format "  hook %s failed: %s" (plist-get failure :event)
                          (plist-get failure :reason))
          'robota-failure))))
    ("session_closed"
     (robota--insert-line session "[session closed]" 'robota-notice))))

(defun robota--one-line (text)
  "TEXT on one line, cut to `robota-preview-width' characters."
  (truncate-string-to-width
   (replace-regexp-in-string "[\n\r\t ]+" " " (string-trim text))
   robota-preview-width nil nil "…"))

(defun robota--format-arguments (arguments)
  "A compact one-line rendering of a tool's ARGUMENTS plist."
  (robota--one-line
   (cond ((null arguments) "{}")
         ((condition-case nil
              (json-serialize arguments :null-object nil
                              :false-object :json-false)
            (error nil)))
         (t (format "%S" arguments)))))

;;;; Approvals

(defmacro robota--in-session-buffer (session &rest body)
  "Run BODY in SESSION's buffer, or the current one if it was killed."
  (declare (indent 1) (debug t))
  (let ((buffer (make-symbol "buffer")))
    `(let ((,buffer (robota--session-buffer ,session)))
       (with-current-buffer (if (buffer-live-p ,buffer)
                                ,buffer
                              (current-buffer))
         ,@body))))

(defun robota--schedule-approvals (session execution requests)
  "Ask about REQUESTS of EXECUTION of SESSION soon, outside the process filter.
A request already being asked about is not asked again."
  (let ((fresh (cl-remove-if
                (lambda (request)
                  (member (plist-get request :requestId)
                          (robota--session-asked session)))
                (append requests nil))))
    (when fresh
      (setf (robota--session-asked session)
            (append (robota--request-ids fresh)
                    (robota--session-asked session)))
      (run-at-time 0 nil #'robota--answer-approvals session execution fresh))))

(defun robota--request-ids (items)
  "The :requestId of each of ITEMS, approval requests or responses."
  (mapcar (lambda (item) (plist-get item :requestId)) (append items nil)))

(defun robota--answer-approvals (session execution requests)
  "Decide REQUESTS of SESSION's EXECUTION and send the answers with resume.
Quitting a question sends nothing; an answer that cannot be sent (the
connection to robotad is gone) is said to be lost.  Either way
`robota-review-pending' asks again."
  (condition-case err
      (let ((responses
             (catch 'robota--question-ended
               (let ((robota--asking (cons session execution)))
                 (mapcar
                  (lambda (request)
                    (list :requestId (plist-get request :requestId)
                          :responseId (robota--new-id)
                          :approved
                          (if (robota--in-session-buffer session
                                (funcall robota-approval-function request))
                              t
                            :json-false)))
                  (append requests nil))))))
        (if (eq responses 'elsewhere)
            (robota--answered-elsewhere session requests)
          (robota--when-subscribed
           session
           (lambda (session)
             (robota--send-answers session execution responses)))))
    (quit
     (robota--unask session requests)
     (message
      "robota: approval postponed; `robota-review-pending' to answer"))
    (error (robota--answer-lost session requests
                                (error-message-string err)))))

(defun robota--send-answers (session execution responses)
  "Send RESPONSES to SESSION's EXECUTION with `session/resume'."
  (condition-case err
      (progn
        (setf (robota--session-state session) 'running)
        (robota--call
         'session/resume
         (list :sessionId (robota--session-id session) :executionId execution
               :responses (vconcat responses))
         :session session
         :timeout nil
         :on-error
         (lambda (err)
           (if (eql (plist-get err :code) -32011)
               ;; Another client (robotactl, another Emacs) answered first.
               (robota--insert-line
                session "  [already answered elsewhere]" 'robota-notice)
             (robota--answer-lost session responses
                                  (or (plist-get err :message) "no answer")))
           t)))
    (error (robota--answer-lost session responses
                                (error-message-string err)))))

(defun robota--asked-about-p (session execution)
  "Non-nil while a question about SESSION's EXECUTION is open."
  (and robota--asking
       (eq (car robota--asking) session)
       (equal (cdr robota--asking) execution)))

(defun robota--stop-asking (session execution)
  "End the open question about SESSION's EXECUTION: another client answered.
Run from a timer, which runs inside the question's wait for input, as
`with-timeout' ends one; nothing when that question is over."
  (when (robota--asked-about-p session execution)
    (throw 'robota--question-ended 'elsewhere)))

(defun robota--answered-elsewhere (session requests)
  "Say that SESSION's REQUESTS, asked here, were answered by another client."
  (robota--unask session requests)
  (robota--insert-line session "  [answered elsewhere]" 'robota-notice)
  (message "robota: the approval was answered by another client"))

(defun robota--unask (session requests)
  "Forget that SESSION's REQUESTS were asked about, so they can be again.
REQUESTS are approval requests or responses to them."
  (setf (robota--session-asked session)
        (cl-set-difference (robota--session-asked session)
                           (robota--request-ids requests)
                           :test #'equal)))

(defun robota--answer-lost (session requests reason)
  "Say that the answers to SESSION's REQUESTS may not have reached robotad.
REASON says why; `robota-review-pending' asks again."
  (robota--unask session requests)
  (setf (robota--session-state session) 'waiting)
  (let ((text (format "approval answer not delivered (%s); \
`M-x robota-review-pending' asks again" reason)))
    (robota--insert-line session (concat "✗ " text) 'robota-failure)
    (message "robota: %s" text)))

(defun robota-ask-approval (request)
  "Ask whether to allow REQUEST, showing its tool, arguments and reason.
They are shown exactly (`robota--approval-arguments', `robota--visible'):
what is asked about is what runs."
  (y-or-n-p (format "Allow robota to run %s %s (%s)? "
                    (robota--visible (format "%s" (plist-get request :tool)))
                    (robota--approval-arguments
                     (plist-get request :arguments))
                    (robota--visible (format "%s" (plist-get request :reason))))))

(defconst robota--whole-arguments
  '(:file_path :command :path :url :pattern)
  "Arguments an approval shows whole: what permissions are decided on.")

(defcustom robota-approval-value-width 2000
  "Longest rendering of an argument an approval does not show whole.
The path, command, URL or pattern a permission is decided on is always
shown whole; a file's content is cut after this many characters."
  :type 'integer
  :group 'robota)

(defun robota--approval-arguments (arguments)
  "A tool's ARGUMENTS plist as JSON for an approval, shown exactly.
The arguments in `robota--whole-arguments' stand whole; another string
longer than `robota-approval-value-width' is cut, saying how much was
left out.  Never a one-line preview: a command cut at its 100th
character could hide what follows it."
  (let ((shown nil))
    (while arguments
      (let ((key (pop arguments))
            (value (pop arguments)))
        (when (and (stringp value)
                   (not (memq key robota--whole-arguments))
                   (> (length value) robota-approval-value-width))
          (setq value (format "%s… (%d more characters)"
                              (substring value 0 robota-approval-value-width)
                              (- (length value) robota-approval-value-width))))
        (setq shown (append shown (list key value)))))
    (robota--visible
     (cond ((null shown) "{}")
           ((condition-case nil
                (json-serialize shown :null-object nil
                                :false-object :json-false)
              (error nil)))
           (t (format "%S" shown))))))

(defconst robota--unseen-regexp
  (rx (any (#x0 . #x8) (#xb . #x1f) (#x7f . #xa0) #xad #x34f (#x600 . #x605)
           #x61c #x6dd #x70f #x890 #x891 #x8e2 #x115f #x1160 #x1680 #x17b4
           #x17b5 (#x180b . #x180f) (#x2000 . #x200f) (#x2028 . #x202f)
           (#x205f . #x2064) (#x2066 . #x206f) #x3000 #x3164 (#xfe00 . #xfe0f)
           #xfeff #xffa0 (#xfff9 . #xfffb) #x110bd #x110cd (#x13430 . #x1343f)
           (#x1bca0 . #x1bca3) (#x1d173 . #x1d17a) #xe0001 (#xe0020 . #xe007f)
           (#xe0100 . #xe01ef)))
  "Characters an approval shows by name, not as they are.
Controls, bidi controls, and every character that draws nothing or
passes for a space.")

(defun robota--visible (text)
  "TEXT with each character a person could not see or read rightly shown.
A C0 control or DEL in caret notation (^[), any other (a C1 or bidi
control, a zero-width or non-ASCII space, a variation selector) as
<U+200B>: a bidi override made a command read as another, a zero-width
space made a host name look like one it is not.  Newline and tab stay."
  (replace-regexp-in-string
   robota--unseen-regexp
   (lambda (match)
     (let ((char (aref match 0)))
       (if (or (< char #x20) (= char #x7f))
           (format "^%c" (logxor char #x40))
         (format "<U+%04X>" char))))
   text t t))

;;;; Output buffer

(defvar robota-output-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "p") #'robota-send-prompt)
    (define-key map (kbd "a") #'robota-abort)
    (define-key map (kbd "v") #'robota-review-pending)
    (define-key map (kbd "s") #'robota-status)
    map)
  "Keymap of `robota-output-mode'.")

(define-derived-mode robota-output-mode special-mode "robota"
  "Major mode of a robota session buffer: the conversation as it streams.
\\{robota-output-mode-map}"
  (setq-local truncate-lines nil)
  (visual-line-mode 1))

(defun robota--insert (session text face)
  "Append TEXT with FACE to SESSION's buffer; windows at its end follow."
  (let ((buffer (robota--session-buffer session)))
    (when (and (buffer-live-p buffer) (not (string-empty-p text)))
      (with-current-buffer buffer
        (let ((inhibit-read-only t))
          (save-excursion
            (goto-char (point-max))
            (insert-before-markers
             (if face (propertize text 'face face) text))))))))

(defun robota--fresh-line (session)
  "End the last line of SESSION's buffer unless it is empty or ended."
  (let ((buffer (robota--session-buffer session)))
    (when (and (buffer-live-p buffer)
               (with-current-buffer buffer
                 (not (memq (char-before (point-max)) '(nil ?\n)))))
      (robota--insert session "\n" nil))))

(defun robota--insert-line (session line face)
  "Append LINE with FACE to SESSION's buffer on a line of its own."
  (robota--fresh-line session)
  (robota--insert session line face)
  (robota--insert session "\n" nil))

(defun robota--insert-aside (session line face)
  "Insert LINE with FACE in SESSION's buffer on a line of its own.
It goes above the line being streamed, if any, so that a notice which
is not part of the stream and does not end it (a failed request) never
splits the model's text."
  (let ((buffer (robota--session-buffer session)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (let ((inhibit-read-only t))
          (save-excursion
            (goto-char (point-max))
            (forward-line 0)
            (insert-before-markers (propertize line 'face face) "\n")))))))

;;;; Key map

;;;###autoload
(defvar robota-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "s") #'robota-start-session)
    (define-key map (kbd "t") #'robota-attach-session)
    (define-key map (kbd "p") #'robota-send-prompt)
    (define-key map (kbd "r") #'robota-send-region)
    (define-key map (kbd "v") #'robota-review-pending)
    (define-key map (kbd "a") #'robota-abort)
    (define-key map (kbd "i") #'robota-status)
    (define-key map (kbd "b") #'robota-switch-to-buffer)
    map)
  "Keymap of the robota commands, to bind under a prefix of your choice.")
;;;###autoload
(defalias 'robota-command-map robota-command-map)

(provide 'robota)
;;; robota.el ends here
